"""The main file of the Spark driver under the Spark Operator (spec.mainApplicationFile).

spark-submit runs a Python application only from a ``.py`` file; this one is the
``isrwatch`` command line, so the SparkApplication's arguments are isrwatch's (``run``).
"""

from streaming.cli import main

if __name__ == "__main__":
    main()

# syntax=docker/dockerfile:1
# The isrwatch image: the package with the dependency versions tested together
# (constraints.txt), a Java 17 runtime for Spark, and an entrypoint that runs the isrwatch
# command line (default: `isrwatch run`) or, for the Spark Operator, a Spark driver or
# executor. The Helm chart (helm/isrwatch) runs it as user 10001 with a read-only root
# filesystem.
#
#   docker build -t isrwatch:0.1.0 .
#
# Object-store checkpoints need Hadoop's connector for the store, which PySpark does not
# carry: pass its jars as URL=SHA256 items, e.g. for S3A the hadoop-aws jar of PySpark's
# Hadoop version (hadoop-client-api-*.jar in pyspark/jars) and the AWS SDK bundle that
# hadoop-aws version depends on:
#
#   docker build --build-arg SPARK_EXTRA_JARS="https://.../hadoop-aws-X.jar=SHA256 ..." .
#
# Spark's own Kafka connector (kafka.source_format: kafka) is in the image: Maven resolves
# jvm/spark-kafka/pom.xml at build time, as `make spark-kafka` does, and its jars join
# PySpark's own, where the job finds the connector (streaming/job/connector.py) and
# Spark puts it on the driver's and the executors' classpath. Nothing is fetched at run
# time.

ARG PYTHON_IMAGE=python:3.11-slim-bookworm
ARG MAVEN_IMAGE=maven:3.9-eclipse-temurin-17

FROM ${MAVEN_IMAGE} AS spark-kafka
WORKDIR /src
COPY jvm/spark-kafka/pom.xml ./pom.xml
RUN mvn --batch-mode --quiet -Dstyle.color=never --file pom.xml dependency:copy-dependencies \
        -DincludeScope=runtime -DoutputDirectory=/jars/spark-kafka

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/isrwatch/venv
WORKDIR /src
COPY pyproject.toml constraints.txt README.md ./
COPY state ./state
COPY streaming ./streaming
COPY dashboards ./dashboards
RUN /opt/isrwatch/venv/bin/pip install --constraint constraints.txt . \
    && /opt/isrwatch/venv/bin/pip check
ARG SPARK_EXTRA_JARS=""
COPY helm/image/fetch_jars.py ./
RUN /opt/isrwatch/venv/bin/python fetch_jars.py \
        /opt/isrwatch/venv/lib/python3.11/site-packages/pyspark/jars "${SPARK_EXTRA_JARS}"
COPY --from=spark-kafka /jars/spark-kafka/ /opt/isrwatch/venv/lib/python3.11/site-packages/pyspark/jars/

FROM ${PYTHON_IMAGE}
# The JRE's postinst needs the man directory that slim images leave out.
RUN mkdir -p /usr/share/man/man1 \
    && apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jre-headless tini \
    && rm -rf /var/lib/apt/lists/* \
    && ln -s "$(dirname "$(dirname "$(readlink -f "$(command -v java)")")")" /opt/java \
    && groupadd --gid 10001 isrwatch \
    && useradd --uid 10001 --gid 10001 --home-dir /tmp --no-create-home \
        --shell /usr/sbin/nologin isrwatch \
    && install -d -o 10001 -g 10001 /var/lib/isrwatch
COPY --from=build /opt/isrwatch/venv /opt/isrwatch/venv
COPY conf /opt/isrwatch/conf
COPY helm/image/entrypoint.sh helm/image/driver.py /opt/isrwatch/
ENV PATH=/opt/isrwatch/venv/bin:$PATH \
    JAVA_HOME=/opt/java \
    SPARK_HOME=/opt/isrwatch/venv/lib/python3.11/site-packages/pyspark \
    PYSPARK_PYTHON=/opt/isrwatch/venv/bin/python \
    PYSPARK_DRIVER_PYTHON=/opt/isrwatch/venv/bin/python \
    ISRWATCH_CONF_DIR=/opt/isrwatch/conf \
    NUMBA_CACHE_DIR=/tmp/numba-cache \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
LABEL org.opencontainers.image.title="isrwatch" \
      org.opencontainers.image.description="Live Kafka replication monitor on Spark Structured Streaming" \
      org.opencontainers.image.licenses="Apache-2.0"
WORKDIR /var/lib/isrwatch
USER 10001:10001
EXPOSE 9464
ENTRYPOINT ["/usr/bin/tini", "--", "/opt/isrwatch/entrypoint.sh"]
CMD ["run"]

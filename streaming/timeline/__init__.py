"""``isrwatch timeline``: the story of an incident, in words and in a picture.

``facts`` derives what happened from a replayed capture and/or health records; ``report``
and ``markdown`` tell it, ``picture`` draws it; ``cli`` is the command.
"""

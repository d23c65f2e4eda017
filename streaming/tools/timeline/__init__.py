"""``isrwatch timeline``: the story of an incident, in words and in a picture.

``facts`` names what happened and ``builder`` derives it from a replayed capture and/or
health records (``capture``, ``health_records``, ``assemble``); ``report``, ``moments`` and
``markdown`` tell it in the ``words`` they share, ``picture`` draws it (``picture_lanes``,
``picture_summary``, on ``picture_drawing``); ``cli`` is the command.
"""

"""Tools around the job: demo, live view, embedded broker, probe, replay, restart check,
timeline."""

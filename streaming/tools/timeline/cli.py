"""``isrwatch timeline``: the story of a time range, from a capture and/or health records."""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime
from pathlib import Path

import click

from streaming.cli_options import config_option, load_or_exit, set_option
from streaming.tools.timeline.assemble import TimelineRange, assemble
from streaming.tools.timeline.capture import DEFAULT_STEP_MS
from streaming.tools.timeline.facts import TimelineFilter
from streaming.tools.timeline.health_records import HealthInput
from streaming.tools.timeline.markdown import render_markdown


def parse_time(text: str | None) -> int | None:
    """Epoch ms, or an ISO 8601 time (UTC unless it says otherwise)."""
    if text is None:
        return None
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        moment = datetime.fromisoformat(text)
    except ValueError as error:
        raise click.BadParameter(f"{text!r} is neither epoch ms nor an ISO 8601 time") from error
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return round(moment.timestamp() * 1000)


@click.command(name="timeline")
@click.argument(
    "capture", required=False, type=click.Path(exists=True, dir_okay=False, path_type=Path)
)
@click.option(
    "--out",
    "out_dir",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Write timeline.png, timeline.html and timeline.md here.",
)
@click.option(
    "--health-out",
    "health_files",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Health records written by `isrwatch run --health-out`; repeatable.",
)
@click.option(
    "--bootstrap-servers",
    default=None,
    help="Read the partition-health topic from this Kafka (host:port,...).",
)
@click.option("--from", "since", default=None, help="Start: epoch ms or ISO 8601 (UTC).")
@click.option("--to", "until", default=None, help="End: epoch ms or ISO 8601 (UTC).")
@click.option("--topic", "topics", multiple=True, help="Only this topic; repeatable.")
@click.option("--partition", "partitions", multiple=True, type=int, help="Only this partition.")
@click.option("--broker", "brokers", multiple=True, type=int, help="Only this broker's replicas.")
@click.option(
    "--step-ms",
    type=click.IntRange(min=1),
    default=DEFAULT_STEP_MS,
    show_default=True,
    help="Replaying a capture: evaluate every partition this often (event time).",
)
@config_option
@set_option
def timeline_command(
    capture: Path | None,
    out_dir: Path,
    health_files: tuple[Path, ...],
    bootstrap_servers: str | None,
    since: str | None,
    until: str | None,
    topics: tuple[str, ...],
    partitions: tuple[int, ...],
    brokers: tuple[int, ...],
    step_ms: int,
    config_file: Path | None,
    overrides: dict[str, object],
) -> None:
    """The story of an incident: which followers fell behind and when, the shrinks Kafka
    made (predicted? overdue?), propagation windows, offline and under-min-ISR periods.

    Reads CAPTURE (a replay file), health records (--health-out files, or the
    partition-health topic with --bootstrap-servers), or both; writes OUT/timeline.png,
    OUT/timeline.html and OUT/timeline.md.
    """
    from streaming.tools.timeline.picture import render_html, render_png

    flags = {"kafka.bootstrap_servers": bootstrap_servers}
    config = load_or_exit(config_file, overrides, flags)
    within = TimelineRange(parse_time(since), parse_time(until))
    if capture is None and not health_files and bootstrap_servers is None:
        raise click.UsageError("give a CAPTURE, --health-out files or --bootstrap-servers")
    health = HealthInput(within.since_ms, within.until_ms)
    records = health.from_files(health_files)
    names = [str(path) for path in health_files]
    if bootstrap_servers is not None:
        try:
            records = sorted(
                [*records, *health.from_topic(config)], key=lambda r: int(r["as_of_ms"])
            )
        except Exception as error:  # kafka-python raises many kinds; all mean "cannot read"
            raise click.ClickException(
                f"cannot read {config.topics.partition_health} at {bootstrap_servers}: {error}"
            ) from error
        names.append(f"topic {config.topics.partition_health}")
    where = TimelineFilter(frozenset(topics), frozenset(partitions), frozenset(brokers))
    with capture.open(encoding="utf-8") if capture else contextlib.nullcontext() as lines:
        timeline = assemble(
            config.rules,
            capture=lines,
            capture_name=capture.name if capture else "",
            health=records,
            health_name=", ".join(names),
            where=where,
            within=within,
            step_ms=step_ms,
        )
    if health.skipped:
        skipped = ", ".join(f"{n} {why}" for why, n in sorted(health.skipped.items()))
        timeline.notes.append(f"Health records not used: {skipped}")
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "timeline.md").write_text(render_markdown(timeline), encoding="utf-8")
    render_png(timeline, out_dir / "timeline.png")
    render_html(timeline, out_dir / "timeline.html")
    click.echo(
        f"timeline: {len(timeline.lanes)} follower lanes, {len(timeline.shrinks)} shrinks, "
        f"{len(timeline.overdue)} overdue, {len(timeline.blackouts)} propagations, "
        f"{len(timeline.periods)} partition periods -> {out_dir}/timeline.{{png,html,md}}",
        err=True,
    )

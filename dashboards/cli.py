"""``isrwatch dashboards``: write the Grafana dashboards and alert rule groups as JSON."""

from __future__ import annotations

from pathlib import Path

import click

from dashboards.defaults import DEFAULT_DATASOURCE_UID, DEFAULT_FOLDER_UID, RULES_FILE


@click.command(name="dashboards")
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    required=True,
    help="Directory to write to (the committed copy is dashboards/json).",
)
@click.option(
    "--rules",
    "rules_file",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    default=RULES_FILE,
    show_default=True,
    help="Prometheus rules file the Grafana-managed alert rules are made from.",
)
@click.option(
    "--datasource-uid",
    default=DEFAULT_DATASOURCE_UID,
    show_default=True,
    help="UID of the Prometheus data source the Grafana alert rules query.",
)
@click.option(
    "--folder-uid",
    default=DEFAULT_FOLDER_UID,
    show_default=True,
    help="UID of the Grafana folder the alert rules go in.",
)
def dashboards_command(
    out_dir: Path, rules_file: Path, datasource_uid: str, folder_uid: str
) -> None:
    """Write the Grafana dashboards (OUT/*.json) and the Grafana-managed alert rule groups
    (OUT/alerting/*.json), generated with grafana-foundation-sdk for Grafana 11.6.

    Dashboards select their Prometheus data source with a variable; the alert rules need
    the data source's UID (--datasource-uid).
    """
    from dashboards.generate import outputs, write

    for path in write(out_dir, outputs(rules_file, datasource_uid, folder_uid)):
        click.echo(str(path), err=True)

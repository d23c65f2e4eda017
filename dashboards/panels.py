"""Shared pieces of the isrwatch dashboards: data source, variables, panel builders.

Every panel is built through these functions, which require a description: it tells an
operator what the panel means and what to do about it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from grafana_foundation_sdk.builders import common as common_builders
from grafana_foundation_sdk.builders import dashboard as dashboard_builders
from grafana_foundation_sdk.builders import prometheus, stat, statetimeline, table, timeseries
from grafana_foundation_sdk.cog.builder import Builder
from grafana_foundation_sdk.models import common
from grafana_foundation_sdk.models import dashboard as model
from grafana_foundation_sdk.models.prometheus import PromQueryFormat

DATASOURCE = model.DataSourceRef(type_val="prometheus", uid="${datasource}")
TAGS = ["isrwatch", "kafka"]
REFRESH = "30s"

GREEN, YELLOW, ORANGE, RED, BLUE, PURPLE = "green", "yellow", "orange", "red", "blue", "purple"


def base_dashboard(uid: str, title: str, description: str) -> dashboard_builders.Dashboard:
    """A dashboard with the data source and job variables and links to its siblings."""
    return (
        dashboard_builders.Dashboard(title)
        .uid(uid)
        .description(description)
        .tags(TAGS)
        .refresh(REFRESH)
        .time("now-1h", "now")
        .timezone(common.TimeZoneBrowser)
        .tooltip(model.DashboardCursorSync.CROSSHAIR)
        .readonly()
        .link(
            dashboard_builders.DashboardLink("isrwatch")
            .type(model.DashboardLinkType.DASHBOARDS)
            .tags(["isrwatch"])
            .as_dropdown(True)
            .include_vars(False)
            .keep_time(True)
        )
        .with_variable(
            dashboard_builders.DatasourceVariable("datasource")
            .label("Prometheus")
            .type("prometheus")
            .description("The Prometheus that scrapes the isrwatch exporter")
        )
        .with_variable(
            query_variable("job", "label_values(isrwatch_seconds_since_last_batch, job)")
            .label("isrwatch job")
            .description("Scrape job of one isrwatch deployment, which monitors one Kafka cluster")
        )
    )


def query_variable(name: str, query: str) -> dashboard_builders.QueryVariable:
    """A variable filled from Prometheus label values, refreshed with the time range."""
    return (
        dashboard_builders.QueryVariable(name)
        .datasource(DATASOURCE)
        .query(query)
        .refresh(model.VariableRefresh.ON_TIME_RANGE_CHANGED)
        .sort(model.VariableSort.NATURAL_ASC)
    )


def multi_variable(name: str, query: str, label: str) -> dashboard_builders.QueryVariable:
    """A multi-value variable whose "All" matches every value (use with ``=~``)."""
    return query_variable(name, query).label(label).multi(True).include_all(True).all_value(".*")


def target(
    expr: str,
    legend: str = "",
    ref: str = "A",
    *,
    instant: bool = False,
    table_format: bool = False,
) -> prometheus.Dataquery:
    query = prometheus.Dataquery().expr(expr).ref_id(ref).legend_format(legend or "__auto")
    if instant:
        query = query.instant()
    if table_format:
        query = query.format(PromQueryFormat.TABLE)
    return query


def targets(*queries: tuple[str, str]) -> list[prometheus.Dataquery]:
    """Range queries (expr, legend) with ref ids A, B, C, ..."""
    return [target(expr, legend, chr(ord("A") + i)) for i, (expr, legend) in enumerate(queries)]


def thresholds(*steps: tuple[float | None, str]) -> dashboard_builders.ThresholdsConfig:
    """Absolute thresholds; the first step's value is None (the base colour)."""
    return (
        dashboard_builders.ThresholdsConfig()
        .mode(model.ThresholdsMode.ABSOLUTE)
        .steps([model.Threshold(value=value, color=color) for value, color in steps])
    )


def value_map(texts: dict[str, tuple[str, str]]) -> list[model.ValueMapping]:
    """Value -> (text, colour) mappings."""
    return [
        model.ValueMap(
            options={
                value: model.ValueMappingResult(text=text, color=color, index=i)
                for i, (value, (text, color)) in enumerate(texts.items())
            }
        )
    ]


def legend_table(*calcs: str) -> common_builders.VizLegendOptions:
    return (
        common_builders.VizLegendOptions()
        .display_mode(common.LegendDisplayMode.TABLE)
        .placement(common.LegendPlacement.BOTTOM)
        .show_legend(True)
        .calcs(list(calcs))
    )


def tooltip_all() -> common_builders.VizTooltipOptions:
    return (
        common_builders.VizTooltipOptions()
        .mode(common.TooltipDisplayMode.MULTI)
        .sort(common.SortOrder.DESCENDING)
    )


def time_series(
    title: str,
    description: str,
    queries: Sequence[prometheus.Dataquery],
    *,
    unit: str = "short",
    width: int = 12,
    height: int = 8,
    stacked: bool = False,
    minimum: float | None = 0,
    legend_calcs: Iterable[str] = ("lastNotNull", "max"),
) -> timeseries.Panel:
    panel = (
        timeseries.Panel()
        .title(title)
        .description(description)
        .datasource(DATASOURCE)
        .targets(list(queries))
        .unit(unit)
        .span(width)
        .height(height)
        .fill_opacity(10)
        .line_width(1)
        .show_points(common.VisibilityMode.NEVER)
        .legend(legend_table(*legend_calcs))
        .tooltip(tooltip_all())
    )
    if minimum is not None:
        panel = panel.min(minimum)
    if stacked:
        panel = panel.stacking(common_builders.StackingConfig().mode(common.StackingMode.NORMAL))
    return panel


def stat_panel(
    title: str,
    description: str,
    expr: str,
    *,
    legend: str = "",
    unit: str = "short",
    steps: Sequence[tuple[float | None, str]] = ((None, GREEN), (1, RED)),
    width: int = 4,
    height: int = 4,
    no_value: str = "0",
) -> stat.Panel:
    """One number now (instant query), coloured by thresholds."""
    return (
        stat.Panel()
        .title(title)
        .description(description)
        .datasource(DATASOURCE)
        .with_target(target(expr, legend, instant=True))
        .unit(unit)
        .span(width)
        .height(height)
        .no_value(no_value)
        .thresholds(thresholds(*steps))
        .color_mode(common.BigValueColorMode.BACKGROUND)
        .graph_mode(common.BigValueGraphMode.NONE)
        .reduce_options(common_builders.ReduceDataOptions().calcs(["lastNotNull"]).values(False))
    )


def state_timeline(
    title: str,
    description: str,
    queries: Sequence[prometheus.Dataquery],
    mappings: list[model.ValueMapping],
    *,
    width: int = 24,
    height: int = 8,
) -> statetimeline.Panel:
    return (
        statetimeline.Panel()
        .title(title)
        .description(description)
        .datasource(DATASOURCE)
        .targets(list(queries))
        .mappings(mappings)
        .span(width)
        .height(height)
        .show_value(common.VisibilityMode.AUTO)
        .merge_values(True)
        .row_height(0.8)
        .fill_opacity(80)
        .color_scheme(dashboard_builders.FieldColor().mode(model.FieldColorModeId.THRESHOLDS))
        .thresholds(thresholds((None, GREEN)))
    )


def instant_table(
    title: str,
    description: str,
    queries: Sequence[prometheus.Dataquery],
    *,
    hidden: Sequence[str] = ("Time", "__name__", "job", "instance"),
    renames: dict[str, str] | None = None,
    unit: str = "short",
    width: int = 12,
    height: int = 8,
    links: Sequence[dashboard_builders.DashboardLink] = (),
) -> table.Panel:
    """The current series of instant table queries, one row each, merged on their labels."""
    panel = (
        table.Panel()
        .title(title)
        .description(description)
        .datasource(DATASOURCE)
        .targets(list(queries))
        .unit(unit)
        .span(width)
        .height(height)
        .align(common.FieldTextAlignment.AUTO)
        .inspect(False)
        .filterable(True)
        .with_transformation(model.DataTransformerConfig(id_val="merge", options={}))
        .with_transformation(
            model.DataTransformerConfig(
                id_val="organize",
                options={
                    "excludeByName": dict.fromkeys(hidden, True),
                    "renameByName": dict(renames or {}),
                },
            )
        )
    )
    if links:
        panel = panel.data_links(list(links))
    return panel


def drilldown_link(title: str, url: str) -> dashboard_builders.DashboardLink:
    """A data link (a table cell or a series point) to another dashboard."""
    return dashboard_builders.DashboardLink(title).type(model.DashboardLinkType.LINK).url(url)


def row(title: str) -> dashboard_builders.Row:
    return dashboard_builders.Row(title)


def build_sections(
    dashboard: dashboard_builders.Dashboard,
    sections: Sequence[tuple[str, Sequence[Builder[model.Panel]]]],
) -> model.Dashboard:
    """A row per section, its panels under it; then the dashboard, panels numbered."""
    for title, panels in sections:
        dashboard = dashboard.with_row(row(title))
        for panel in panels:
            dashboard = dashboard.with_panel(panel)
    return number_panels(dashboard.build())


def number_panels(dashboard: model.Dashboard) -> model.Dashboard:
    """Give every panel (rows included) a distinct id, in layout order: Grafana keys
    panel links, repeats and library panels by id."""
    for number, panel in enumerate(dashboard.panels or [], start=1):
        panel.id_val = number
    return dashboard

//! The picture beside the report, drawn with `plotters` (SVG backend): on
//! top, latency over time (x = send time, y = end-to-end ms on a log scale,
//! p50/p95/max per time bin) with the warm-up, the pause and the catch-up
//! shaded; below, the latency distribution as a CDF, steady state and spike
//! apart. Both carry the 45 ms SLO line, so a reader sees at a glance where
//! the budget holds and what the spike cost.
//!
//! This module only shapes the data (time bins, CDF points, axis ticks);
//! `plotters` draws the axes, grids, curves and shading. Legends are rows
//! outside the plots, so that no curve is ever hidden behind one.

use std::ops::Range;

use anyhow::{Context, Result};
use chrono::{DateTime, Utc};
use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::verdict::latency::{seconds_between, Sample, SpikeOutcome};

/// The end-to-end p95 budget (docs/design.md#numbers), in milliseconds.
const SLO_MS: f64 = 45.0;

const WIDTH: u32 = 1000;
const HEIGHT: u32 = 860;
/// Room above the title.
const TITLE_MARGIN: u32 = 12;
/// Height of the upper (latency over time) half, title excluded.
const TIME_HEIGHT: u32 = 400;
/// Height of a plot's header line (its caption, and the upper plot's legend).
const HEADER: u32 = 30;
/// Height of the lower plot's legend row.
const LEGEND: u32 = 30;
/// Room left of the plots for the tick labels and the axis description.
const Y_LABELS: u32 = 80;
/// Room right of the plots for the SLO label of the upper plot.
const RIGHT_MARGIN: u32 = 75;
/// Room below the plots for the tick labels and the axis description.
const X_LABELS: u32 = 45;
/// Time bins of the upper plot: about one per 3 pixels.
const TIME_BINS: usize = 300;
/// Points of each CDF curve.
const CDF_POINTS: usize = 400;
/// Shares of events marked on the CDF's y axis.
const CDF_TICKS: [f64; 6] = [0.0, 0.25, 0.5, 0.75, 0.95, 1.0];

const STEADY_COLOUR: RGBColor = RGBColor(0x1f, 0x77, 0xb4);
const SPIKE_COLOUR: RGBColor = RGBColor(0xff, 0x7f, 0x0e);
const MAX_COLOUR: RGBColor = RGBColor(0xd6, 0x27, 0x28);
const SLO_COLOUR: RGBColor = RGBColor(0xc0, 0x00, 0x00);
const GRID_COLOUR: RGBColor = RGBColor(0xdd, 0xdd, 0xdd);
const WARMUP_COLOUR: RGBColor = RGBColor(0x9e, 0xca, 0xe1);
const WARMUP_TEXT: RGBColor = RGBColor(0x31, 0x68, 0x8e);
const PAUSE_COLOUR: RGBColor = RGBColor(0x88, 0x88, 0x88);
const PAUSE_TEXT: RGBColor = RGBColor(0x44, 0x44, 0x44);
const CATCH_UP_COLOUR: RGBColor = RGBColor(0xff, 0xd7, 0x00);
const CATCH_UP_TEXT: RGBColor = RGBColor(0x7a, 0x60, 0x00);

/// What the picture shows.
pub struct Picture<'a> {
    pub title: String,
    /// Time zero of the x axis: the start of the run.
    pub started_at: DateTime<Utc>,
    /// Every applied event of the run.
    pub samples: &'a [Sample],
    /// The injected spike: from SIGSTOP (or the burst) to SIGCONT (or the
    /// burst's end), and what to call it.
    pub pause: Option<(DateTime<Utc>, DateTime<Utc>, &'a str)>,
    pub spike: Option<&'a SpikeOutcome>,
    /// End of the warm-up, when one was set.
    pub warmup_until: Option<DateTime<Utc>>,
    pub steady: &'a [Sample],
    pub spiked: &'a [Sample],
}

type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;

/// A linear axis ticked at given values. (`plotters`' `with_key_points`
/// would do, but leaves a linear `f64` axis without the label formatter the
/// mesh needs.)
struct Ticked {
    linear: RangedCoordf64,
    ticks: Vec<f64>,
}

impl Ticked {
    fn new(range: Range<f64>, ticks: Vec<f64>) -> Ticked {
        Ticked {
            linear: range.into(),
            ticks,
        }
    }
}

impl Ranged for Ticked {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        self.linear.map(value, limit)
    }

    /// The ticks as the bold (labelled) points, no light grid in between.
    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            Vec::new()
        } else {
            self.ticks.clone()
        }
    }

    fn range(&self) -> Range<f64> {
        self.linear.range()
    }
}

/// The picture as an SVG document.
pub fn render(picture: &Picture<'_>) -> Result<String> {
    let mut svg = String::new();
    draw(&mut svg, picture).context("drawing the picture")?;
    Ok(svg)
}

fn draw(svg: &mut String, picture: &Picture<'_>) -> Result<()> {
    let root = SVGBackend::with_string(svg, (WIDTH, HEIGHT)).into_drawing_area();
    root.fill(&WHITE)?;
    let body = root
        .margin(TITLE_MARGIN, 0, 0, 0)
        .titled(&picture.title, font(16.0).style(FontStyle::Bold))?;
    let (upper, lower) = body.split_vertically(TIME_HEIGHT);
    let (low, high) = latency_range(picture.samples);
    latency_over_time(&upper, picture, low, high)?;
    distribution(&lower, picture, low, high)?;
    root.present()?;
    Ok(())
}

/// A font of `px` pixels: the SVG backend writes `font-size` as the size
/// it is given divided by 1.24.
fn font(px: f64) -> FontDesc<'static> {
    ("sans-serif", px * 1.24).into_font()
}

fn text(px: f64, colour: RGBColor, h: HPos, v: VPos) -> TextStyle<'static> {
    font(px).color(&colour).pos(Pos::new(h, v))
}

fn slo_label() -> String {
    format!("SLO {SLO_MS} ms")
}

fn latency_ms(sample: &Sample) -> f64 {
    sample.latency().num_microseconds().unwrap_or(i64::MAX) as f64 / 1000.0
}

/// Latency range shown: whole decades around the data, at least 1-100 ms so
/// the SLO line is always inside.
fn latency_range(samples: &[Sample]) -> (f64, f64) {
    let ms: Vec<f64> = samples.iter().map(latency_ms).collect();
    let min = ms.iter().copied().fold(1.0, f64::min).max(0.01);
    let max = ms.iter().copied().fold(100.0, f64::max);
    (
        10f64.powf(min.log10().floor()),
        10f64.powf(max.log10().ceil()),
    )
}

/// The decades from `low` to `high`, both whole decades: the latency ticks.
fn decades(low: f64, high: f64) -> Vec<f64> {
    let first = low.log10().round() as i32;
    let last = high.log10().round() as i32;
    (first..=last).map(|e| 10f64.powi(e)).collect()
}

fn format_ms(ms: f64) -> String {
    if ms >= 1000.0 {
        format!("{} s", ms / 1000.0)
    } else {
        format!("{ms} ms")
    }
}

/// Ticks every round step from 0 to `span` seconds, about `target` of them.
fn time_ticks(span: f64, target: f64) -> Vec<f64> {
    const STEPS: [f64; 12] = [
        0.5, 1.0, 2.0, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0,
    ];
    let step = STEPS
        .into_iter()
        .find(|step| span / step <= target)
        .unwrap_or(3600.0);
    (0..)
        .map(|i| f64::from(i) * step)
        .take_while(|tick| *tick <= span + 1e-9)
        .collect()
}

/// The value at quantile `q` of sorted values.
fn at_quantile(sorted: &[f64], q: f64) -> f64 {
    let index = ((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[index]
}

/// p50, p95 and max of the latencies of each time bin, at the bin's middle
/// (seconds since the start); `None` for a bin without events.
fn binned_quantiles(picture: &Picture<'_>, span: f64) -> [Vec<Option<(f64, f64)>>; 3] {
    let mut bins: Vec<Vec<f64>> = vec![Vec::new(); TIME_BINS];
    for sample in picture.samples {
        let seconds = seconds_between(picture.started_at, sample.sent_at);
        let bin = ((seconds / span * TIME_BINS as f64) as usize).min(TIME_BINS - 1);
        bins[bin].push(latency_ms(sample));
    }
    let mut curves: [Vec<Option<(f64, f64)>>; 3] = Default::default();
    for (index, bin) in bins.iter_mut().enumerate() {
        bin.sort_by(f64::total_cmp);
        let middle = (index as f64 + 0.5) * span / TIME_BINS as f64;
        for (curve, q) in curves.iter_mut().zip([0.5, 0.95, 1.0]) {
            curve.push((!bin.is_empty()).then(|| (middle, at_quantile(bin, q))));
        }
    }
    curves
}

fn latency_over_time(area: &Area<'_>, picture: &Picture<'_>, low: f64, high: f64) -> Result<()> {
    // Wide enough for the last send and for the end of the catch-up.
    let since_start = |t: DateTime<Utc>| seconds_between(picture.started_at, t);
    let span = picture
        .samples
        .iter()
        .map(|s| since_start(s.sent_at))
        .chain(picture.spike.map(|s| since_start(s.caught_up_at)))
        .fold(1.0, f64::max);
    let (header, plot) = area.split_vertically(HEADER);
    caption(
        &header,
        &format!(
            "End-to-end latency by send time, per {} ms bin",
            (span / TIME_BINS as f64 * 1000.0).round().max(1.0)
        ),
    )?;
    legend(
        &header,
        WIDTH as i32 - RIGHT_MARGIN as i32 - 280,
        &[
            (STEADY_COLOUR, "p50".to_owned()),
            (SPIKE_COLOUR, "p95".to_owned()),
            (MAX_COLOUR, "max per bin".to_owned()),
        ],
    )?;

    let mut chart = ChartBuilder::on(&plot)
        .margin_right(RIGHT_MARGIN)
        .x_label_area_size(X_LABELS)
        .y_label_area_size(Y_LABELS)
        .build_cartesian_2d(
            Ticked::new(0.0..span, time_ticks(span, 12.0)),
            (low..high).log_scale().with_key_points(decades(low, high)),
        )?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .bold_line_style(GRID_COLOUR)
        .x_desc("send time (s since start)")
        .y_desc("end-to-end latency (log scale)")
        .x_label_formatter(&|seconds| format!("{seconds}"))
        .y_label_formatter(&|ms| format_ms(*ms))
        .label_style(font(12.0))
        .axis_desc_style(font(12.0))
        .draw()?;

    // Shaded phases first, so the curves are drawn over them.
    let band = |from: f64, to: f64, colour: RGBColor, opacity: f64| {
        Rectangle::new([(from, low), (to, high)], colour.mix(opacity).filled())
    };
    if let Some(until) = picture.warmup_until {
        let end = since_start(until);
        chart.draw_series([band(0.0, end, WARMUP_COLOUR, 0.3)])?;
        annotate(
            &chart,
            (end / 2.0, low),
            (0, -8),
            "warm-up",
            WARMUP_TEXT,
            (HPos::Center, VPos::Bottom),
        )?;
    }
    if let Some((began, ended, label)) = picture.pause {
        let (from, to) = (since_start(began), since_start(ended));
        chart.draw_series([band(from, to, PAUSE_COLOUR, 0.25)])?;
        annotate(
            &chart,
            ((from + to) / 2.0, high),
            (0, 4),
            label,
            PAUSE_TEXT,
            (HPos::Center, VPos::Top),
        )?;
        if let Some(spike) = picture.spike {
            let caught_up = since_start(spike.caught_up_at);
            chart.draw_series([band(to, caught_up, CATCH_UP_COLOUR, 0.3)])?;
            // Beside the band, or inside it when the band reaches the edge.
            let right_edge = chart.plotting_area().get_pixel_range().0.end;
            let (dx, h_pos) = if chart.backend_coord(&(caught_up, high)).0 + 110 > right_edge {
                (-4, HPos::Right)
            } else {
                (4, HPos::Left)
            };
            let label = format!(
                "catch-up {:.2} s",
                seconds_between(ended, spike.caught_up_at)
            );
            annotate(
                &chart,
                (caught_up, high),
                (dx, 20),
                &label,
                CATCH_UP_TEXT,
                (h_pos, VPos::Top),
            )?;
        }
    }

    let [p50, p95, max] = binned_quantiles(picture, span);
    for (curve, colour, width) in [
        (max, MAX_COLOUR, 1),
        (p95, SPIKE_COLOUR, 1),
        (p50, STEADY_COLOUR, 2),
    ] {
        // Broken where a bin has no events.
        for run in curve.split(Option::is_none).filter(|run| run.len() >= 2) {
            chart.draw_series(LineSeries::new(
                run.iter().flatten().copied(),
                colour.stroke_width(width),
            ))?;
        }
    }
    chart.draw_series(DashedLineSeries::new(
        [(0.0, SLO_MS), (span, SLO_MS)],
        6,
        4,
        SLO_COLOUR.stroke_width(2),
    ))?;
    annotate(
        &chart,
        (span, SLO_MS),
        (4, 0),
        &slo_label(),
        SLO_COLOUR,
        (HPos::Left, VPos::Center),
    )?;
    frame(&chart)?;
    Ok(())
}

fn distribution(area: &Area<'_>, picture: &Picture<'_>, low: f64, high: f64) -> Result<()> {
    let (header, rest) = area.split_vertically(HEADER);
    let (plot, legend_row) = rest.split_vertically(rest.dim_in_pixel().1 - LEGEND);
    caption(&header, "Latency distribution (CDF)")?;

    let mut chart = ChartBuilder::on(&plot)
        .margin_right(RIGHT_MARGIN)
        .x_label_area_size(X_LABELS)
        .y_label_area_size(Y_LABELS)
        .build_cartesian_2d(
            (low..high).log_scale().with_key_points(decades(low, high)),
            Ticked::new(0.0..1.0, CDF_TICKS.to_vec()),
        )?;
    chart
        .configure_mesh()
        .bold_line_style(GRID_COLOUR)
        .x_desc("end-to-end latency: event time → ledger row processed_at (log scale)")
        .y_desc("share of events ≤ latency")
        .x_label_formatter(&|ms| format_ms(*ms))
        .y_label_formatter(&|share| format!("{:.0}%", share * 100.0))
        .label_style(font(12.0))
        .axis_desc_style(font(12.0))
        .draw()?;

    let mut entries = Vec::new();
    for (samples, colour, name) in [
        (picture.steady, STEADY_COLOUR, "steady state"),
        (picture.spiked, SPIKE_COLOUR, "caught in the spike"),
    ] {
        if samples.is_empty() {
            continue;
        }
        let mut sorted: Vec<f64> = samples.iter().map(latency_ms).collect();
        sorted.sort_by(f64::total_cmp);
        let points = (0..=CDF_POINTS).map(|i| {
            let q = i as f64 / CDF_POINTS as f64;
            (at_quantile(&sorted, q.max(1e-9)), q)
        });
        chart.draw_series(LineSeries::new(points, colour.stroke_width(2)))?;
        entries.push((
            colour,
            format!(
                "{name}: {} events, p95 {:.1} ms",
                sorted.len(),
                at_quantile(&sorted, 0.95)
            ),
        ));
    }
    chart.draw_series(DashedLineSeries::new(
        [(SLO_MS, 0.0), (SLO_MS, 1.0)],
        6,
        4,
        SLO_COLOUR.stroke_width(2),
    ))?;
    annotate(
        &chart,
        (SLO_MS, 0.0),
        (4, -8),
        &slo_label(),
        SLO_COLOUR,
        (HPos::Left, VPos::Bottom),
    )?;
    frame(&chart)?;
    legend(&legend_row, Y_LABELS as i32, &entries)
}

/// `label` in 12 px text at `at` on the plot, `offset` pixels away, the
/// text's `anchor` there.
fn annotate<CT: CoordTranslate>(
    chart: &ChartContext<'_, SVGBackend<'_>, CT>,
    at: CT::From,
    offset: (i32, i32),
    label: &str,
    colour: RGBColor,
    anchor: (HPos, VPos),
) -> Result<()> {
    let style = text(12.0, colour, anchor.0, anchor.1);
    chart
        .plotting_area()
        .draw(&(EmptyElement::at(at) + Text::new(label.to_owned(), offset, style)))?;
    Ok(())
}

/// A plot's caption, bold, on its header line and aligned with the plot.
fn caption(header: &Area<'_>, caption: &str) -> Result<()> {
    let style = font(14.0)
        .style(FontStyle::Bold)
        .color(&BLACK)
        .pos(Pos::new(HPos::Left, VPos::Center));
    header.draw(&Text::new(
        caption,
        (Y_LABELS as i32, HEADER as i32 / 2),
        style,
    ))?;
    Ok(())
}

/// A black frame around the plot (the mesh draws only the two axes).
fn frame<X: Ranged, Y: Ranged>(
    chart: &ChartContext<'_, SVGBackend<'_>, Cartesian2d<X, Y>>,
) -> Result<()> {
    let area = chart.plotting_area().strip_coord_spec();
    let (width, height) = area.dim_in_pixel();
    area.draw(&Rectangle::new(
        [(0, 0), (width as i32 - 1, height as i32 - 1)],
        BLACK.stroke_width(1),
    ))?;
    Ok(())
}

/// Entries side by side from `x`, on the middle line of `area`: each a
/// coloured stroke and its label.
fn legend(area: &Area<'_>, x: i32, entries: &[(RGBColor, String)]) -> Result<()> {
    let y = area.dim_in_pixel().1 as i32 / 2;
    let style = text(12.0, BLACK, HPos::Left, VPos::Center);
    let mut x = x;
    for (colour, label) in entries {
        area.draw(&PathElement::new(
            [(x, y), (x + 22, y)],
            colour.stroke_width(3),
        ))?;
        area.draw(&Text::new(label.as_str(), (x + 28, y), style.clone()))?;
        let (width, _) = area.estimate_text_size(label, &style)?;
        x += 28 + width as i32 + 24;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(sent_ms: i64, latency_ms: i64) -> Sample {
        let sent_at = DateTime::<Utc>::from_timestamp_millis(1_800_000_000_000 + sent_ms).unwrap();
        Sample {
            sent_at,
            processed_at: sent_at + chrono::Duration::milliseconds(latency_ms),
        }
    }

    #[test]
    fn latency_ticks_are_the_decades_of_the_range() {
        assert_eq!(decades(1.0, 1000.0), vec![1.0, 10.0, 100.0, 1000.0]);
        assert_eq!(decades(0.1, 100.0), vec![0.1, 1.0, 10.0, 100.0]);
    }

    #[test]
    fn time_ticks_are_round_steps_over_the_run() {
        assert_eq!(
            time_ticks(15.1, 12.0),
            vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0, 12.0, 14.0]
        );
        assert_eq!(time_ticks(3.0, 12.0).len(), 7, "every half second");
    }

    #[test]
    fn latency_range_always_contains_the_slo() {
        assert_eq!(latency_range(&[sample(0, 3)]), (1.0, 100.0));
        assert_eq!(
            latency_range(&[sample(0, 3), sample(1, 5_500)]),
            (1.0, 10_000.0)
        );
    }

    #[test]
    fn picture_has_both_plots_the_slo_and_the_pause() {
        let samples: Vec<Sample> = (0..2_000).map(|i| sample(i * 10, 3 + i % 7)).collect();
        let started_at = samples[0].sent_at;
        let spike = SpikeOutcome {
            began_at: samples[500].sent_at,
            caught_up_at: samples[1100].sent_at,
            window_end: samples[1110].sent_at,
        };
        let svg = render(&Picture {
            title: "lag-spike <test> & co".into(),
            started_at,
            samples: &samples,
            pause: Some((
                samples[500].sent_at,
                samples[1000].sent_at,
                "consumer paused",
            )),
            spike: Some(&spike),
            warmup_until: Some(samples[100].sent_at),
            steady: &samples[..500],
            spiked: &samples[500..],
        })
        .unwrap();
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains("lag-spike &lt;test&gt; &amp; co"));
        assert_eq!(svg.matches("SLO 45 ms").count(), 2);
        assert!(svg.contains("consumer paused"));
        assert!(svg.contains("warm-up"));
        assert!(svg.contains("catch-up 1.00 s"));
        assert!(svg.contains("steady state: 500 events"));
        assert!(svg.contains("<polyline"));
    }
}

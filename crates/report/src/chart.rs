//! The one chart engine of every flowpath report: plotters' SVG backend, which writes text
//! as `<text>` elements with a generic `sans-serif` family, so no font library or system
//! font is needed and the files render offline in any browser. Chosen over hand-written
//! SVG because the suite's charts need what plotters already does well (log axes, error
//! bars, legends); the lab's bars and the planner's step lines are drawn with it too.

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint, Ranged};
use plotters::prelude::*;
use std::ops::Range;

pub const FONT: &str = "sans-serif";
pub const PALETTE: [RGBColor; 4] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
];
pub const RED: RGBColor = RGBColor(214, 39, 40);
pub const GREY: RGBColor = RGBColor(120, 120, 120);

/// A linear f64 axis whose ticks are exactly `keys` (plotters' own `with_key_points`
/// cannot be combined with an f64 axis's label formatter in 0.3.7).
#[derive(Clone)]
pub struct Keyed {
    range: Range<f64>,
    keys: Vec<f64>,
}

pub fn keyed(range: Range<f64>, keys: Vec<f64>) -> Keyed {
    Keyed { range, keys }
}

impl Ranged for Keyed {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, v: &f64, limit: (i32, i32)) -> i32 {
        let span = self.range.end - self.range.start;
        if span == 0.0 {
            return (limit.0 + limit.1) / 2;
        }
        let t = (v - self.range.start) / span;
        limit.0 + (t * (limit.1 - limit.0) as f64).round() as i32
    }

    fn key_points<Hint: KeyPointHint>(&self, _hint: Hint) -> Vec<f64> {
        self.keys.clone()
    }

    fn range(&self) -> Range<f64> {
        self.range.clone()
    }
}

pub type DrawResult = Result<(), Box<dyn std::error::Error>>;

/// Render with `draw`; if plotters reports an error, a small SVG that says so instead.
pub fn render(
    (w, h): (u32, u32),
    draw: impl FnOnce(DrawingArea<SVGBackend, plotters::coord::Shift>) -> DrawResult,
) -> String {
    let mut svg = String::new();
    let res = {
        let root = SVGBackend::with_string(&mut svg, (w, h)).into_drawing_area();
        draw(root)
    };
    match res {
        Ok(()) => svg,
        Err(e) => format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"60\"><text x=\"10\" y=\"30\" \
             font-family=\"sans-serif\">chart failed: {}</text></svg>",
            crate::escape(&e.to_string())
        ),
    }
}

pub fn max_of(it: impl Iterator<Item = f64>) -> f64 {
    it.fold(0.0f64, f64::max)
}

/// One line of a [`step_chart`]: a name and integer levels at increasing x.
pub type StepSeries = (String, Vec<(f64, u64)>);

/// Integer series over a share (x in `0..=x_max`, shown as percentages) as step lines:
/// each level holds until the next x, then steps (whole cores, for the planner). The
/// first series is drawn heavier; `marker` draws a dashed line at that x.
pub fn step_chart(
    title: &str,
    (x_desc, y_desc): (&str, &str),
    series: &[StepSeries],
    x_max: f64,
    marker: Option<(f64, &str)>,
) -> String {
    let y_top = series
        .iter()
        .flat_map(|s| s.1.iter().filter(|p| p.0 <= x_max + 1e-12).map(|p| p.1))
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    render((520, 360), |root| {
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, (FONT, 15))
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(50)
            .build_cartesian_2d(0f64..x_max, 0f64..y_top * 1.1)?;
        chart
            .configure_mesh()
            .x_desc(x_desc)
            .y_desc(y_desc)
            .x_label_formatter(&|x| crate::pct(*x))
            .y_label_formatter(&|y| crate::thousands(*y))
            .label_style((FONT, 11))
            .draw()?;
        if let Some((m, label)) = marker.filter(|m| m.0 <= x_max) {
            chart
                .draw_series(DashedLineSeries::new(
                    [(m, 0.0), (m, y_top * 1.1)],
                    3,
                    3,
                    BLACK.stroke_width(1),
                ))?
                .label(label)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], BLACK));
        }
        for (i, (name, pts)) in series.iter().enumerate() {
            let color = STEP_PALETTE[i % STEP_PALETTE.len()];
            let width = if i == 0 { 3 } else { 2 };
            chart
                .draw_series(LineSeries::new(
                    steps(pts, x_max),
                    color.stroke_width(width),
                ))?
                .label(name.as_str())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(3))
                });
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .label_font((FONT, 11))
            .background_style(WHITE.mix(0.85))
            .border_style(GREY)
            .draw()?;
        root.present()?;
        Ok(())
    })
}

/// The corners of a step line through `pts` (those with x up to `x_max`).
fn steps(pts: &[(f64, u64)], x_max: f64) -> Vec<(f64, f64)> {
    let mut out: Vec<(f64, f64)> = Vec::new();
    for &(x, y) in pts.iter().filter(|p| p.0 <= x_max + 1e-12) {
        if let Some(&(_, prev)) = out.last() {
            out.push((x, prev));
        }
        out.push((x, y as f64));
    }
    out
}

const STEP_PALETTE: [RGBColor; 6] = [
    RGBColor(85, 85, 85),
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(214, 39, 40),
];

/// One bar of a [`bar_chart`].
pub struct Bar {
    /// Shown left of the bar.
    pub label: String,
    pub value: f64,
    /// A min–max whisker over the bar.
    pub range: Option<(f64, f64)>,
    /// Shown right of the bar.
    pub note: String,
    /// Index into the palette.
    pub color: usize,
}

/// Horizontal bars, first on top, with whiskers and a note on each; `x_desc` under the axis.
pub fn bar_chart(title: &str, x_desc: &str, bars: &[Bar]) -> String {
    let n = bars.len().max(1);
    let max = bars
        .iter()
        .map(|b| b.range.map_or(b.value, |r| r.1).max(b.value))
        .fold(0.0f64, f64::max)
        .max(1e-3)
        * 1.45;
    let h = 90 + 26 * n as u32;
    let keys: Vec<f64> = (0..n).map(|i| i as f64 + 0.5).collect();
    let row = |i: usize| (n - 1 - i) as f64; // first bar on top
    render((820, h), |root| {
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, (FONT, 15))
            .margin(10)
            .x_label_area_size(35)
            .y_label_area_size(220)
            .build_cartesian_2d(0f64..max, keyed(0f64..n as f64, keys))?;
        chart
            .configure_mesh()
            .disable_y_mesh()
            .x_desc(x_desc)
            .y_label_formatter(&|y| {
                let i = y.floor().max(0.0) as usize;
                bars.get(n.saturating_sub(1 + i))
                    .map_or(String::new(), |b| b.label.clone())
            })
            .label_style((FONT, 12))
            .draw()?;
        chart.draw_series(bars.iter().enumerate().map(|(i, b)| {
            let color = PALETTE[b.color % PALETTE.len()];
            Rectangle::new(
                [(0.0, row(i) + 0.15), (b.value, row(i) + 0.85)],
                color.filled(),
            )
        }))?;
        chart.draw_series(bars.iter().enumerate().filter_map(|(i, b)| {
            let (lo, hi) = b.range?;
            let y = row(i) + 0.5;
            Some(PathElement::new(
                vec![(lo, y), (hi, y)],
                BLACK.stroke_width(1),
            ))
        }))?;
        chart.draw_series(bars.iter().enumerate().map(|(i, b)| {
            let x = b.range.map_or(b.value, |r| r.1).max(b.value);
            Text::new(b.note.clone(), (x, row(i) + 0.75), (FONT, 12).into_font())
        }))?;
        root.present()?;
        Ok(())
    })
}

/// A chart over a [`Keyed`] x axis and a linear y axis, as the suite's charts draw on.
pub type KeyedChart<'a, 'b> =
    ChartContext<'a, SVGBackend<'b>, Cartesian2d<Keyed, plotters::coord::types::RangedCoordf64>>;

/// The legend every chart draws: at `pos`, on a translucent white box with a grey border.
pub fn legend<'a, DB, CT>(
    chart: &mut ChartContext<'a, DB, CT>,
    pos: SeriesLabelPosition,
) -> DrawResult
where
    DB: DrawingBackend + 'a,
    CT: CoordTranslate,
    DB::ErrorType: 'static,
{
    chart
        .configure_series_labels()
        .position(pos)
        .label_font((FONT, 13))
        .background_style(WHITE.mix(0.85))
        .border_style(GREY)
        .draw()?;
    Ok(())
}

//! The suite's charts as standalone SVG documents, drawn with the project's one chart
//! engine (`flowpath_report::chart`). Each chart reads top to bottom: its range, its axes,
//! then each series with its markers and labels.

use super::{model, AttackSeries, ClassResult, ScalingSeries, SizePoint};
use plotters::coord::combinators::IntoLogRange;
use plotters::prelude::*;

use flowpath_report::chart::{
    keyed, legend, max_of, render, DrawResult, KeyedChart, FONT, PALETTE, RED,
};
use flowpath_report::pct;

/// Aggregate Mpps against worker cores, one measured line per miss rate with min–max
/// bars and a dashed "linear from one core" line.
pub fn scaling(series: &[ScalingSeries]) -> String {
    render((760, 440), |root| {
        root.fill(&WHITE)?;
        let (max_cores, ymax) = scaling_range(series);
        let keys: Vec<f64> = (1..=max_cores).map(|c| c as f64).collect();
        let mut chart = ChartBuilder::on(&root)
            .caption("Throughput vs worker cores (IPv4, 64 B)", (FONT, 20))
            .margin(12)
            .x_label_area_size(45)
            .y_label_area_size(60)
            .build_cartesian_2d(keyed(0.5f64..max_cores as f64 + 0.5, keys), 0f64..ymax)?;
        chart
            .configure_mesh()
            .x_desc("worker cores (each its own datapath and caches)")
            .y_desc("aggregate Mpps")
            .x_label_formatter(&|x| format!("{}", x.round() as i64))
            .label_style((FONT, 13))
            .light_line_style(TRANSPARENT)
            .draw()?;
        for (i, s) in series.iter().enumerate() {
            draw_scaling_series(&mut chart, s, PALETTE[i % PALETTE.len()], max_cores)?;
        }
        legend(&mut chart, SeriesLabelPosition::UpperLeft)?;
        root.present()?;
        Ok(())
    })
}

/// The scaling chart's x range (the most cores) and y range: the highest measured run or
/// the linear extrapolation from one core, with room above.
fn scaling_range(series: &[ScalingSeries]) -> (usize, f64) {
    let max_cores = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.cores))
        .max()
        .unwrap_or(1);
    let ideal_max = series
        .iter()
        .filter_map(|s| {
            let one = s.points.iter().find(|p| p.cores == 1)?;
            Some(one.aggregate_mpps.median * max_cores as f64)
        })
        .fold(0.0, f64::max);
    let ymax = max_of(
        series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.aggregate_mpps.max)),
    )
    .max(ideal_max)
    .max(1e-3)
        * 1.15;
    (max_cores, ymax)
}

/// One miss rate's scaling line: medians with min–max bars, each point labelled with its
/// Mpps and efficiency, and the dashed line linear from one core.
fn draw_scaling_series(
    chart: &mut KeyedChart,
    s: &ScalingSeries,
    color: RGBColor,
    max_cores: usize,
) -> DrawResult {
    let pts: Vec<(f64, f64)> = s
        .points
        .iter()
        .map(|p| (p.cores as f64, p.aggregate_mpps.median))
        .collect();
    chart
        .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))?
        .label(format!("measured, {} new flows", pct(s.miss_rate)))
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
    chart.draw_series(pts.iter().map(|&p| Circle::new(p, 4, color.filled())))?;
    chart.draw_series(s.points.iter().map(|p| {
        ErrorBar::new_vertical(
            p.cores as f64,
            p.aggregate_mpps.min,
            p.aggregate_mpps.median,
            p.aggregate_mpps.max,
            color.stroke_width(1),
            8,
        )
    }))?;
    chart.draw_series(s.points.iter().map(|p| {
        Text::new(
            format!(
                "{:.1} Mpps ({:.0} %)",
                p.aggregate_mpps.median,
                p.efficiency * 100.0
            ),
            (p.cores as f64 + 0.04, p.aggregate_mpps.median),
            (FONT, 12).into_font().color(&color),
        )
    }))?;
    if let Some(one) = s.points.iter().find(|p| p.cores == 1) {
        let r = one.aggregate_mpps.median;
        chart
            .draw_series(DashedLineSeries::new(
                (1..=max_cores).map(|c| (c as f64, r * c as f64)),
                6,
                4,
                color.mix(0.6).stroke_width(1),
            ))?
            .label(format!("linear from 1 core, {}", pct(s.miss_rate)))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.mix(0.6)));
    }
    Ok(())
}

/// Cycles per packet against mean frame size, cached packets and new flows (log axis).
pub fn sizes(points: &[SizePoint]) -> String {
    render((760, 440), |root| {
        root.fill(&WHITE)?;
        let (lo, hi) = cycles_range(points);
        let xmax = max_of(points.iter().map(|p| p.mean_frame_bytes)).max(100.0) * 1.12;
        let keys: Vec<f64> = points.iter().map(|p| p.mean_frame_bytes).collect();
        let labels = size_labels(points);
        let mut chart = ChartBuilder::on(&root)
            .caption("Cycles per packet vs frame size (IPv4)", (FONT, 20))
            .margin(12)
            .x_label_area_size(45)
            .y_label_area_size(60)
            .build_cartesian_2d(keyed(0f64..xmax, keys), (lo..hi).log_scale())?;
        chart
            .configure_mesh()
            .x_desc("mean frame size, bytes (FCS included)")
            .y_desc("TSC cycles per packet (log scale)")
            .x_label_formatter(&|x| {
                labels
                    .iter()
                    .find(|l| (l.0 - x).abs() < 0.5)
                    .map_or_else(|| format!("{x:.0}"), |l| l.1.clone())
            })
            .y_label_formatter(&|y| format!("{y:.0}"))
            .label_style((FONT, 13))
            .light_line_style(TRANSPARENT)
            .draw()?;
        for (i, (name, get)) in [
            (
                "cached packets (hits)",
                (|p: &SizePoint| &p.hit) as fn(&SizePoint) -> &super::Point,
            ),
            ("new flows (misses)", |p: &SizePoint| &p.miss),
        ]
        .into_iter()
        .enumerate()
        {
            let color = PALETTE[i];
            let pts: Vec<(f64, f64)> = points
                .iter()
                .map(|p| (p.mean_frame_bytes, get(p).cycles.median))
                .collect();
            chart
                .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))?
                .label(name)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                });
            chart.draw_series(pts.iter().map(|&p| Circle::new(p, 4, color.filled())))?;
            chart.draw_series(points.iter().map(|p| {
                let c = &get(p).cycles;
                ErrorBar::new_vertical(p.mean_frame_bytes, c.min, c.median, c.max, color, 8)
            }))?;
            chart.draw_series(pts.iter().map(|&(x, y)| {
                Text::new(
                    format!("{y:.0}"),
                    (x + xmax * 0.008, y * 1.08),
                    (FONT, 12).into_font().color(&color),
                )
            }))?;
        }
        legend(&mut chart, SeriesLabelPosition::MiddleRight)?;
        root.present()?;
        Ok(())
    })
}

/// The size chart's y range (log scale): every run's cycles with room below and above.
fn cycles_range(points: &[SizePoint]) -> (f64, f64) {
    let all = points
        .iter()
        .flat_map(|p| [&p.hit, &p.miss])
        .flat_map(|p| [p.cycles.min, p.cycles.max]);
    let (lo, hi) = all.fold((f64::MAX, 0.0f64), |(a, b), c| (a.min(c), b.max(c)));
    if hi > 0.0 {
        (lo * 0.6, hi * 1.8)
    } else {
        (1.0, 10.0)
    }
}

/// Each size's x position and tick label (`IMIX 354` for the mix, else the bytes).
fn size_labels(points: &[SizePoint]) -> Vec<(f64, String)> {
    points
        .iter()
        .map(|p| {
            let l = if p.mix == "imix" {
                format!("IMIX {:.0}", p.mean_frame_bytes)
            } else {
                format!("{:.0}", p.mean_frame_bytes)
            };
            (p.mean_frame_bytes, l)
        })
        .collect()
}

/// Cycles per hit and per miss for each traffic class, side by side, with the ratio.
pub fn hit_miss(classes: &[ClassResult]) -> String {
    render((760, 440), |root| {
        root.fill(&WHITE)?;
        let n = classes.len().max(1);
        let ymax = max_of(
            classes
                .iter()
                .map(|c| c.miss.cycles.max.max(c.hit.cycles.max)),
        )
        .max(1.0)
            * 1.45;
        let keys: Vec<f64> = (0..n).map(|i| i as f64 + 0.5).collect();
        let names: Vec<String> = classes.iter().map(|c| c.class.name().to_string()).collect();
        let mut chart = ChartBuilder::on(&root)
            .caption("Cycles per hit vs per miss, by traffic class", (FONT, 20))
            .margin(12)
            .x_label_area_size(45)
            .y_label_area_size(60)
            .build_cartesian_2d(keyed(0f64..n as f64, keys), 0f64..ymax)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_desc("traffic class (64 B frames, or the smallest that holds the headers)")
            .y_desc("TSC cycles per packet")
            .y_label_formatter(&|y| format!("{y:.0}"))
            .x_label_formatter(&|x| {
                names
                    .get(x.floor().max(0.0) as usize)
                    .cloned()
                    .unwrap_or_default()
            })
            .label_style((FONT, 13))
            .light_line_style(TRANSPARENT)
            .draw()?;
        for (miss, bars) in [
            (false, ("hit (established flow)", PALETTE[0])),
            (true, ("miss (new flow)", PALETTE[1])),
        ] {
            draw_bars(&mut chart, classes, miss, bars, ymax)?;
        }
        chart.draw_series(classes.iter().enumerate().map(|(i, c)| {
            Text::new(
                format!("miss = {:.1}x hit", c.miss_hit_ratio),
                (
                    i as f64 + 0.3,
                    c.miss.cycles.max.max(c.hit.cycles.max) + ymax * 0.12,
                ),
                (FONT, 14).into_font().color(&RED),
            )
        }))?;
        legend(&mut chart, SeriesLabelPosition::UpperLeft)?;
        root.present()?;
        Ok(())
    })
}

/// One bar per class for the hits (or the misses, `miss`), beside each other, with min–max
/// whiskers and the median written above.
fn draw_bars(
    chart: &mut KeyedChart,
    classes: &[ClassResult],
    miss: bool,
    (name, color): (&str, RGBColor),
    ymax: f64,
) -> DrawResult {
    let x0 = 0.12 + 0.39 * f64::from(u8::from(miss));
    chart
        .draw_series(classes.iter().enumerate().map(|(i, c)| {
            let v = if miss { &c.miss } else { &c.hit };
            Rectangle::new(
                [
                    (i as f64 + x0, 0.0),
                    (i as f64 + x0 + 0.37, v.cycles.median),
                ],
                color.filled(),
            )
        }))?
        .label(name)
        .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], color.filled()));
    for (i, c) in classes.iter().enumerate() {
        let v = if miss { &c.miss } else { &c.hit };
        let x = i as f64 + x0 + 0.185;
        let (lo, hi) = (v.cycles.min, v.cycles.max);
        chart.draw_series(
            [
                vec![(x, lo), (x, hi)],
                vec![(x - 0.03, lo), (x + 0.03, lo)],
                vec![(x - 0.03, hi), (x + 0.03, hi)],
            ]
            .into_iter()
            .map(|p| PathElement::new(p, BLACK.stroke_width(1))),
        )?;
    }
    chart.draw_series(classes.iter().enumerate().map(|(i, c)| {
        let v = if miss { &c.miss } else { &c.hit };
        Text::new(
            format!("{:.0}", v.cycles.median),
            (i as f64 + x0 + 0.06, v.cycles.max + ymax * 0.045),
            (FONT, 13).into_font().color(&BLACK),
        )
    }))?;
    Ok(())
}

/// Throughput against miss rate for one class: measured (with min–max bars) and the model
/// `(1 − m)·c_hit + m·c_miss` with a ±10 % band; points outside the band are ringed and
/// labelled with the gap. The x axis places the measured miss rates evenly (so 0–10 %,
/// where the curve falls, is as wide as 10–100 %); the model is drawn between them.
pub fn miss_curve(class: &ClassResult, tsc_hz: f64) -> String {
    render((760, 440), |root| {
        root.fill(&WHITE)?;
        let c = &class.curve;
        let rates: Vec<f64> = c.iter().map(|p| p.miss_rate).collect();
        let model_pts = model_points(class, &rates, tsc_hz);
        let ymax = max_of(
            c.iter()
                .map(|p| model::mpps(tsc_hz, p.measured.cycles.min))
                .chain(model_pts.iter().map(|p| p.1 * (1.0 + model::TOLERANCE))),
        )
        .max(1e-3)
            * 1.12;
        let labels: Vec<String> = rates.iter().map(|&m| pct(m)).collect();
        let mut chart = evenly_spaced(
            &root,
            format!("Throughput vs miss rate, {} (one core)", class.class.name()),
            20,
            &labels,
            ymax,
            "share of packets that are new flows (misses); points evenly spaced",
            "Mpps per core",
        )?;
        draw_model(&mut chart, &model_pts)?;
        draw_measured(&mut chart, class, tsc_hz, ymax)?;
        legend(&mut chart, SeriesLabelPosition::UpperRight)?;
        root.present()?;
        Ok(())
    })
}

/// The model `(1 − m)·c_hit + m·c_miss` in Mpps between the measured rates, at fractional
/// x (point i is at x = i).
fn model_points(class: &ClassResult, rates: &[f64], tsc_hz: f64) -> Vec<(f64, f64)> {
    let n = rates.len().max(1);
    let (hit, miss) = (class.hit.cycles.median, class.miss.cycles.median);
    (0..n.saturating_sub(1))
        .flat_map(|i| {
            let (a, b) = (rates[i], rates[i + 1]);
            (0..24).map(move |s| {
                let t = s as f64 / 24.0;
                (i as f64 + t, a + t * (b - a))
            })
        })
        .chain(rates.last().map(|&m| ((n - 1) as f64, m)))
        .map(|(x, m)| (x, model::mpps(tsc_hz, model::cycles(m, hit, miss))))
        .collect()
}

/// The model line with its ±10 % band.
fn draw_model(chart: &mut KeyedChart, model_pts: &[(f64, f64)]) -> DrawResult {
    let band: Vec<(f64, f64)> = model_pts
        .iter()
        .map(|&(x, y)| (x, y * (1.0 + model::TOLERANCE)))
        .chain(
            model_pts
                .iter()
                .rev()
                .map(|&(x, y)| (x, y * (1.0 - model::TOLERANCE))),
        )
        .collect();
    chart
        .draw_series(std::iter::once(Polygon::new(
            band,
            PALETTE[1].mix(0.15).filled(),
        )))?
        .label("model ±10 %")
        .legend(|(x, y)| {
            Rectangle::new([(x, y - 5), (x + 20, y + 5)], PALETTE[1].mix(0.15).filled())
        });
    chart
        .draw_series(DashedLineSeries::new(
            model_pts.to_vec(),
            8,
            4,
            PALETTE[1].stroke_width(2),
        ))?
        .label("model (1−m)·c_hit + m·c_miss")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], PALETTE[1].stroke_width(2)));
    Ok(())
}

/// The measured points (median, min–max bars); those outside the band ringed in red with
/// their gap.
fn draw_measured(
    chart: &mut KeyedChart,
    class: &ClassResult,
    tsc_hz: f64,
    ymax: f64,
) -> DrawResult {
    let c = &class.curve;
    let meas: Vec<(f64, f64)> = c
        .iter()
        .enumerate()
        .map(|(i, p)| (i as f64, p.measured.mpps))
        .collect();
    let color = PALETTE[0];
    chart
        .draw_series(LineSeries::new(meas.clone(), color.stroke_width(2)))?
        .label("measured (median, min–max)")
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
    chart.draw_series(meas.iter().map(|&p| Circle::new(p, 4, color.filled())))?;
    chart.draw_series(c.iter().enumerate().map(|(i, p)| {
        let cy = &p.measured.cycles;
        ErrorBar::new_vertical(
            i as f64,
            model::mpps(tsc_hz, cy.max),
            p.measured.mpps,
            model::mpps(tsc_hz, cy.min),
            color,
            8,
        )
    }))?;
    chart.draw_series(
        c.iter()
            .enumerate()
            .filter(|(_, p)| p.disagrees)
            .map(|(i, p)| Circle::new((i as f64, p.measured.mpps), 9, RED.stroke_width(2))),
    )?;
    chart.draw_series(
        c.iter()
            .enumerate()
            .filter(|(_, p)| p.disagrees)
            .map(|(i, p)| {
                Text::new(
                    format!("{:+.0} %", p.disagreement * 100.0),
                    (i as f64 + 0.1, p.measured.mpps + ymax * 0.05),
                    (FONT, 13).into_font().color(&RED),
                )
            }),
    )?;
    Ok(())
}

/// "1k", "10k", "1M", or "max" (0: as fast as the worker takes them).
pub fn rate_label(pps: f64) -> String {
    if pps <= 0.0 {
        "max".into()
    } else if pps >= 1e6 {
        format!("{}M", pps / 1e6)
    } else if pps >= 1e3 {
        format!("{}k", pps / 1e3)
    } else {
        format!("{pps}")
    }
}

/// Established-flow throughput kept (%) against the attack's offered rate, one line per
/// defence, with min–max bars; the x axis is the offered rates, evenly spaced.
pub fn attack(series: &AttackSeries) -> String {
    render((760, 440), |root| {
        root.fill(&WHITE)?;
        let rates: Vec<f64> = series.points.iter().map(|p| p.offered_pps).collect();
        let n = rates.len().max(1);
        let ymax = max_of(
            series
                .points
                .iter()
                .flat_map(|p| p.defences.iter().map(|d| 100.0 * d.retained_max)),
        )
        .max(100.0)
            * 1.1;
        let labels: Vec<String> = rates.iter().map(|&r| rate_label(r)).collect();
        let mut chart = evenly_spaced(
            &root,
            format!(
                "Established flows under a {} attack ({} flows offered at {:.1} Mpps, {})",
                series.case,
                series.established_flows,
                series.established_offered_mpps,
                series.classifier
            ),
            17,
            &labels,
            ymax,
            "attack packets per second offered (max: as fast as the worker takes them)",
            "established throughput kept, %",
        )?;
        chart.draw_series(DashedLineSeries::new(
            [(-0.3, 90.0), ((n - 1) as f64 + 0.3, 90.0)],
            6,
            4,
            RED.mix(0.5).stroke_width(1),
        ))?;
        let names: Vec<crate::attack::Defence> = series
            .points
            .first()
            .map(|p| p.defences.iter().map(|d| d.defence).collect())
            .unwrap_or_default();
        for (k, def) in names.iter().enumerate() {
            let color = PALETTE[k % PALETTE.len()];
            let rows: Vec<(f64, &crate::attack::DefenceRow)> = series
                .points
                .iter()
                .enumerate()
                .filter_map(|(i, p)| {
                    p.defences
                        .iter()
                        .find(|d| d.defence == *def)
                        .map(|d| (i as f64, d))
                })
                .collect();
            let pts: Vec<(f64, f64)> = rows
                .iter()
                .map(|(x, d)| (*x, 100.0 * d.established_retained))
                .collect();
            chart
                .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))?
                .label(format!("flowpath, defence: {}", def.name()))
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                });
            chart.draw_series(pts.iter().map(|&p| Circle::new(p, 4, color.filled())))?;
            chart.draw_series(rows.iter().map(|(x, d)| {
                ErrorBar::new_vertical(
                    *x,
                    100.0 * d.retained_min,
                    100.0 * d.established_retained,
                    100.0 * d.retained_max,
                    color.stroke_width(1),
                    8,
                )
            }))?;
        }
        legend(&mut chart, SeriesLabelPosition::LowerLeft)?;
        root.present()?;
        Ok(())
    })
}

/// A chart whose x axis is `labels.len()` evenly spaced points (point i at x = i, labelled
/// `labels[i]`) and whose y axis runs from 0 to `ymax`, with its caption and axis texts.
fn evenly_spaced<'a, 'b>(
    root: &'a DrawingArea<SVGBackend<'b>, plotters::coord::Shift>,
    caption: String,
    caption_size: u32,
    labels: &[String],
    ymax: f64,
    x_desc: &str,
    y_desc: &str,
) -> Result<KeyedChart<'a, 'b>, Box<dyn std::error::Error>> {
    let n = labels.len().max(1);
    let keys: Vec<f64> = (0..n).map(|i| i as f64).collect();
    let mut chart = ChartBuilder::on(root)
        .caption(caption, (FONT, caption_size))
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(60)
        .build_cartesian_2d(keyed(-0.3f64..(n - 1) as f64 + 0.3, keys), 0f64..ymax)?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .x_label_formatter(&|x| {
            labels
                .get(x.round().max(0.0) as usize)
                .cloned()
                .unwrap_or_default()
        })
        .label_style((FONT, 13))
        .light_line_style(TRANSPARENT)
        .draw()?;
    Ok(chart)
}

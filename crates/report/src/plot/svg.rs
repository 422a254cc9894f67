//! A minimal SVG writer: just the elements the plots use, with text escaped and numbers
//! rounded to 0.1 px so files stay small and diff-able.

use std::fmt::Write;

/// Escapes text for SVG character data and attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

/// A number as an SVG coordinate: one decimal, no "-0.0", finite.
fn n(v: f64) -> String {
    let v = if v.is_finite() {
        (v * 10.0).round() / 10.0
    } else {
        0.0
    };
    if v == 0.0 {
        "0".into()
    } else {
        format!("{v}")
    }
}

/// Text anchoring.
#[derive(Debug, Clone, Copy)]
pub enum Anchor {
    Start,
    Middle,
    End,
}

/// An SVG document being built.
pub struct Svg {
    width: f64,
    height: f64,
    body: String,
    clip_ids: usize,
}

impl Svg {
    pub fn new(width: f64, height: f64) -> Svg {
        let mut svg = Svg {
            width,
            height,
            body: String::new(),
            clip_ids: 0,
        };
        svg.rect(0.0, 0.0, width, height, "#ffffff", None);
        svg
    }

    pub fn rect(&mut self, x: f64, y: f64, w: f64, h: f64, fill: &str, opacity: Option<f64>) {
        let op = opacity
            .map(|o| format!(" fill-opacity=\"{o}\""))
            .unwrap_or_default();
        let _ = writeln!(
            self.body,
            "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{fill}\"{op}/>",
            n(x),
            n(y),
            n(w.max(0.0)),
            n(h.max(0.0))
        );
    }

    pub fn line(&mut self, x1: f64, y1: f64, x2: f64, y2: f64, stroke: &str, width: f64) {
        let _ = writeln!(
            self.body,
            "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{stroke}\" stroke-width=\"{width}\"/>",
            n(x1),
            n(y1),
            n(x2),
            n(y2)
        );
    }

    /// A polyline through `points`, broken into separate runs at `None` (a gap in the data).
    /// `class` names the series so tests (and people reading the SVG) can find it.
    pub fn polyline(
        &mut self,
        points: &[Option<(f64, f64)>],
        stroke: &str,
        width: f64,
        dash: Option<&str>,
        class: &str,
        clip: Option<&str>,
    ) {
        let dash = dash
            .map(|d| format!(" stroke-dasharray=\"{d}\""))
            .unwrap_or_default();
        let clip = clip
            .map(|c| format!(" clip-path=\"url(#{c})\""))
            .unwrap_or_default();
        for run in points.split(Option::is_none) {
            let coords: Vec<String> = run
                .iter()
                .flatten()
                .map(|(x, y)| format!("{},{}", n(*x), n(*y)))
                .collect();
            if coords.is_empty() {
                continue;
            }
            let _ = writeln!(
                self.body,
                "<polyline class=\"series\" data-series=\"{}\" points=\"{}\" fill=\"none\" \
                 stroke=\"{stroke}\" stroke-width=\"{width}\" stroke-linejoin=\"round\"{dash}{clip}/>",
                escape(class),
                coords.join(" ")
            );
        }
    }

    /// A filled polygon (for bands).
    pub fn polygon(&mut self, points: &[(f64, f64)], fill: &str, class: &str, clip: Option<&str>) {
        if points.len() < 3 {
            return;
        }
        let clip = clip
            .map(|c| format!(" clip-path=\"url(#{c})\""))
            .unwrap_or_default();
        let coords: Vec<String> = points
            .iter()
            .map(|(x, y)| format!("{},{}", n(*x), n(*y)))
            .collect();
        let _ = writeln!(
            self.body,
            "<polygon class=\"band\" data-series=\"{}\" points=\"{}\" fill=\"{fill}\" stroke=\"none\"{clip}/>",
            escape(class),
            coords.join(" ")
        );
    }

    pub fn circle(&mut self, x: f64, y: f64, r: f64, fill: &str) {
        let _ = writeln!(
            self.body,
            "<circle cx=\"{}\" cy=\"{}\" r=\"{r}\" fill=\"{fill}\"/>",
            n(x),
            n(y)
        );
    }

    pub fn text(&mut self, x: f64, y: f64, size: f64, anchor: Anchor, content: &str) {
        let anchor = match anchor {
            Anchor::Start => "start",
            Anchor::Middle => "middle",
            Anchor::End => "end",
        };
        let _ = writeln!(
            self.body,
            "<text x=\"{}\" y=\"{}\" font-size=\"{size}\" text-anchor=\"{anchor}\">{}</text>",
            n(x),
            n(y),
            escape(content)
        );
    }

    /// Text turned 90° counter-clockwise around (x, y): y-axis titles.
    pub fn vtext(&mut self, x: f64, y: f64, size: f64, content: &str) {
        let _ = writeln!(
            self.body,
            "<text x=\"{}\" y=\"{}\" font-size=\"{size}\" text-anchor=\"middle\" \
             transform=\"rotate(-90 {} {})\">{}</text>",
            n(x),
            n(y),
            n(x),
            n(y),
            escape(content)
        );
    }

    /// Defines a rectangular clip path and returns its id.
    pub fn clip(&mut self, x: f64, y: f64, w: f64, h: f64) -> String {
        self.clip_ids += 1;
        let id = format!("clip{}", self.clip_ids);
        let _ = writeln!(
            self.body,
            "<clipPath id=\"{id}\"><rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"/></clipPath>",
            n(x),
            n(y),
            n(w),
            n(h)
        );
        id
    }

    pub fn finish(self) -> String {
        format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
             <svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" \
             viewBox=\"0 0 {w} {h}\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n{}</svg>\n",
            self.body,
            w = self.width,
            h = self.height
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup() {
        assert_eq!(escape("a<b & \"c\""), "a&lt;b &amp; &quot;c&quot;");
    }

    #[test]
    fn polyline_breaks_at_gaps() {
        let mut s = Svg::new(10.0, 10.0);
        s.polyline(
            &[Some((0.0, 0.0)), Some((1.0, 1.0)), None, Some((2.0, 2.0))],
            "#000",
            1.0,
            None,
            "x",
            None,
        );
        let out = s.finish();
        assert_eq!(out.matches("<polyline").count(), 2);
        assert!(out.contains("points=\"0,0 1,1\""));
    }

    #[test]
    fn numbers_are_finite_and_short() {
        assert_eq!(n(f64::NAN), "0");
        assert_eq!(n(-0.01), "0");
        assert_eq!(n(12.345), "12.3");
    }
}

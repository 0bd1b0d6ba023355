//! The output files of `acoustic3d` read back: PNGs decode to the expected size and are not
//! uniform, the CSV has a row per step and a column per receiver (plus time), and the VTK file
//! parses (by the legacy VTK layout, read here independently of the writer) and holds the
//! written fields exactly.

use std::path::PathBuf;

use stencil_examples::acoustic::{run, Model};
use stencil_examples::checkpoint::Plan;
use stencil_examples::output::{write_png_slice, write_seismogram_png, write_traces_csv, write_vtk, MIN_WIDTH};
use stencil_runtime::{Field3, Host, Shape3};

/// A fresh directory under the system's temporary directory.
fn temp_dir(name: &str) -> PathBuf {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    let dir = std::env::temp_dir().join(format!("stencil-acoustic-output-{name}-{}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Decodes an 8-bit RGB PNG: (width, height, pixels).
fn decode_png(path: &std::path::Path) -> (u32, u32, Vec<u8>) {
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(path).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    assert_eq!((info.color_type, info.bit_depth), (png::ColorType::Rgb, png::BitDepth::Eight));
    buf.truncate(info.buffer_size());
    (info.width, info.height, buf)
}

/// True when the picture has more than one colour.
fn varied(rgb: &[u8]) -> bool {
    rgb.chunks(3).any(|p| p != &rgb[..3])
}

#[test]
fn pngs_and_csv_of_a_small_run() {
    let mut m = Model::layered(16, 60);
    m.pml = 4;
    let outcome = run::<Host, f32>(&Host, &Default::default(), &m, None, &Plan::none(), |_| {}).unwrap();
    let dir = temp_dir("run");

    let section = dir.join("wavefield_xz.png");
    write_png_slice(&section, &outcome.last.u, (m.pml + m.source[1]) as isize, m.pml).unwrap();
    let (w, h, rgb) = decode_png(&section);
    let scale = MIN_WIDTH.div_ceil(16) as u32;
    assert_eq!((w, h), (16 * scale, 16 * scale));
    assert!(varied(&rgb), "the section is one colour");

    let seismogram = dir.join("seismogram.png");
    write_seismogram_png(&seismogram, &outcome.traces).unwrap();
    let (w, h, rgb) = decode_png(&seismogram);
    assert_eq!((w, h), (16 * scale, 60));
    assert!(varied(&rgb), "the seismogram is one colour");

    let csv = dir.join("traces.csv");
    write_traces_csv(&csv, &outcome.traces, m.dt).unwrap();
    let text = std::fs::read_to_string(&csv).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("time_s,r0,"), "header {:?}", lines[0]);
    assert_eq!(lines.len(), 1 + 60, "a header and one row per step");
    for (s, line) in lines[1..].iter().enumerate() {
        let values: Vec<&str> = line.split(',').collect();
        assert_eq!(values.len(), 16 + 1, "time and 16 receivers");
        assert!((values[0].parse::<f64>().unwrap() - (s + 1) as f64 * m.dt).abs() < 1e-12);
        let u: Vec<f32> = values[1..].iter().map(|v| v.parse().unwrap()).collect();
        assert_eq!(u, outcome.traces[s], "row {s} is not the traces of step {}", s + 1);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The text of the line of `bytes` that starts at `at`; moves `at` past its newline.
fn line(bytes: &[u8], at: &mut usize) -> String {
    let end = *at + bytes[*at..].iter().position(|&b| b == b'\n').expect("a line");
    let text = String::from_utf8(bytes[*at..end].to_vec()).expect("an ASCII header line");
    *at = end + 1;
    text
}

#[test]
fn vtk_holds_the_fields() {
    let shape = Shape3::new([7, 5, 6]).halo(4);
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut random = move || {
        state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        ((state >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    };
    let u = Field3::from_fn(shape, |_| random());
    let v = Field3::from_fn(shape, |g| 1500.0 + g[2] as f32);
    let dir = temp_dir("vtk");
    let path = dir.join("wavefield.vtk");
    write_vtk(&path, &[("u", &u), ("velocity", &v)], 10.0, [-40.0; 3]).unwrap();

    let bytes = std::fs::read(&path).unwrap();
    let mut at = 0;
    assert_eq!(line(&bytes, &mut at), "# vtk DataFile Version 3.0");
    line(&bytes, &mut at);
    assert_eq!(line(&bytes, &mut at), "BINARY");
    assert_eq!(line(&bytes, &mut at), "DATASET STRUCTURED_POINTS");
    assert_eq!(line(&bytes, &mut at), "DIMENSIONS 7 5 6");
    assert_eq!(line(&bytes, &mut at), "ORIGIN -40.0 -40.0 -40.0");
    assert_eq!(line(&bytes, &mut at), "SPACING 10.0 10.0 10.0");
    assert_eq!(line(&bytes, &mut at), format!("POINT_DATA {}", 7 * 5 * 6));
    for (name, field) in [("u", &u), ("velocity", &v)] {
        assert_eq!(line(&bytes, &mut at), format!("SCALARS {name} float 1"));
        assert_eq!(line(&bytes, &mut at), "LOOKUP_TABLE default");
        let mut expected = Vec::new();
        for k in 0..6 {
            for j in 0..5 {
                for i in 0..7 {
                    expected.push(field.get([i, j, k]).unwrap());
                }
            }
        }
        let values: Vec<f32> = bytes[at..at + 4 * expected.len()]
            .chunks_exact(4)
            .map(|b| f32::from_be_bytes(b.try_into().unwrap()))
            .collect();
        assert_eq!(values, expected, "array {name}");
        at += 4 * expected.len();
        assert_eq!(line(&bytes, &mut at), "", "a newline after the values of {name}");
    }
    assert_eq!(at, bytes.len(), "nothing after the last array");
    std::fs::remove_dir_all(&dir).unwrap();
}

//! A small HTTP/1.1 load generator for `scripts/bench_replicas.py`: `--connections` keep-alive
//! connections on one thread, each sending the same GET after the last answer, for
//! `--seconds`. It costs far less per request than the script's Python client (whose ceiling
//! on `/healthz` is about 6 500/s on the development machine), so it measures the service
//! rather than itself; on one thread it takes at most one core from the service.
//!
//! ```text
//! cargo build --release --example http_load
//! target/release/examples/http_load --addr 127.0.0.1:8080 [--addr …] --path /v1/jobs/ID \
//!     [--key KEY] [--connections 16] [--seconds 10]
//! ```
//!
//! Prints one JSON line: requests, per_second (all answers), p50_ms, p99_ms and the count of
//! each status code. Connection i goes to the (i mod number of addresses)-th `--addr`. Answers
//! must carry `Content-Length` (the service's do).

use std::collections::BTreeMap;
use std::io::{Error, ErrorKind};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

struct Args {
    addrs: Vec<String>,
    path: String,
    key: Option<String>,
    connections: usize,
    seconds: f64,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        addrs: Vec::new(),
        path: "/healthz".into(),
        key: None,
        connections: 16,
        seconds: 10.0,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--addr" => args.addrs.push(value()?),
            "--path" => args.path = value()?,
            "--key" => args.key = Some(value()?),
            "--connections" => {
                args.connections = value()?.parse().map_err(|e| format!("--connections: {e}"))?
            }
            "--seconds" => args.seconds = value()?.parse().map_err(|e| format!("--seconds: {e}"))?,
            other => return Err(format!("unknown argument {other}")),
        }
    }
    if args.addrs.is_empty() || args.connections == 0 || !(args.seconds > 0.0) {
        return Err("give at least one --addr, --connections ≥ 1 and --seconds > 0".into());
    }
    Ok(args)
}

fn invalid(what: &str) -> Error {
    Error::new(ErrorKind::InvalidData, what.to_owned())
}

/// Reads one answer into `buf` and returns its status code.
async fn read_response(stream: &mut TcpStream, buf: &mut Vec<u8>) -> std::io::Result<u16> {
    buf.clear();
    let mut chunk = [0u8; 16 * 1024];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Err(Error::new(ErrorKind::UnexpectedEof, "connection closed"));
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = std::str::from_utf8(&buf[..head_end]).map_err(|_| invalid("head is not text"))?;
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| invalid("no status"))?;
    let length: usize = head
        .lines()
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse().ok())
                .flatten()
        })
        .ok_or_else(|| invalid("no Content-Length"))?;
    while buf.len() < head_end + length {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Err(Error::new(
                ErrorKind::UnexpectedEof,
                "connection closed in a body",
            ));
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    Ok(status)
}

/// One connection's latencies (µs) and status counts until `deadline`.
async fn connection(
    addr: String,
    request: Vec<u8>,
    deadline: Instant,
) -> std::io::Result<(Vec<u32>, BTreeMap<u16, u64>)> {
    let mut stream = TcpStream::connect(&addr).await?;
    stream.set_nodelay(true)?;
    let (mut buf, mut latencies, mut codes) = (Vec::with_capacity(32 * 1024), Vec::new(), BTreeMap::new());
    while Instant::now() < deadline {
        let start = Instant::now();
        stream.write_all(&request).await?;
        let status = read_response(&mut stream, &mut buf).await?;
        latencies.push(u32::try_from(start.elapsed().as_micros()).unwrap_or(u32::MAX));
        *codes.entry(status).or_insert(0) += 1;
    }
    Ok((latencies, codes))
}

fn percentile_ms(sorted: &[u32], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() - 1) as f64 * q).round() as usize;
    f64::from(sorted[i]) / 1e3
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = parse_args().map_err(|e| format!("http_load: {e}"))?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let (latencies, codes, elapsed) = runtime.block_on(async {
        let start = Instant::now();
        let deadline = start + Duration::from_secs_f64(args.seconds);
        let tasks: Vec<_> = (0..args.connections)
            .map(|i| {
                let addr = args.addrs[i % args.addrs.len()].clone();
                let auth = args
                    .key
                    .as_ref()
                    .map(|k| format!("Authorization: Bearer {k}\r\n"))
                    .unwrap_or_default();
                let request =
                    format!("GET {} HTTP/1.1\r\nHost: {addr}\r\n{auth}\r\n", args.path).into_bytes();
                tokio::spawn(connection(addr, request, deadline))
            })
            .collect();
        let (mut latencies, mut codes) = (Vec::new(), BTreeMap::<u16, u64>::new());
        for task in tasks {
            let (mine, my_codes) = task.await??;
            latencies.extend(mine);
            for (code, count) in my_codes {
                *codes.entry(code).or_insert(0) += count;
            }
        }
        Ok::<_, Box<dyn std::error::Error>>((latencies, codes, start.elapsed()))
    })?;
    let mut sorted = latencies;
    sorted.sort_unstable();
    let report = serde_json::json!({
        "requests": sorted.len(),
        "seconds": elapsed.as_secs_f64(),
        "per_second": sorted.len() as f64 / elapsed.as_secs_f64(),
        "p50_ms": percentile_ms(&sorted, 0.50),
        "p99_ms": percentile_ms(&sorted, 0.99),
        "codes": codes,
    });
    println!("{report}");
    Ok(())
}

//! SecAgg+ against the complete graph (docs/performance-secagg-plus.md):
//! `cargo bench --bench secagg_plus`. The protocol halves in process, no HTTP: S sites
//! (`SiteSession`) and the coordinator (`Aggregator`) exchange the protocol's messages by function
//! call, one round (L = 1) over a vector of M = 1000 words (Table 2's n² term), with ⌈5%·S⌉
//! sites dropping after setup. SecAgg+ runs with its defaults γ = δ = 0.1.
//!
//! Bytes are the JSON bodies the live protocol would carry (`serde_json` of the messages; a
//! masked vector as base64, as the service sends it): per site, what it sends and receives;
//! at the coordinator, the sum over all sites (it relays every box). Time is CPU time in this
//! process: per site, the mean over the sites of dealing, opening its inbox, masking and
//! answering the unmask request; at the coordinator, `Aggregator::unmask_sum`.
//!
//! Every row is measured. The complete graph's Shamir x-coordinates are site indices: GF(2⁸)
//! up to S = 255, GF(2¹⁶) above (`shamir::Field`), so S = 1000 runs with 34-byte shares. SecAgg+
//! uses neighbourhood positions as x-coordinates (GF(2⁸)). The live service's cap of 64 sites
//! does not bind these protocol halves.
//!
//! Writes the table between the markers of docs/performance-secagg-plus.md and the log–log
//! figures docs/img/secagg_plus_bytes.png and docs/img/secagg_plus_time.png.
//! `cargo bench --bench secagg_plus -- --quick` runs S = 10 and 100 only and writes nothing;
//! `-- --sites=1000 --protocol=sparse` runs that row alone and writes nothing (`--sites=S` alone
//! runs both protocols at S; `--protocol=…` alone runs it at S = 10 and 100).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Instant;

use privpca::federation::messages::{Participant, ShareBox, UnmaskRequest};
use privpca::federation::secagg::{Aggregator, GraphSpec, SiteSession};
use privpca::federation::wire;
use rand::{RngCore, SeedableRng, seq::SliceRandom};
use rand_chacha::ChaCha20Rng;
use uuid::Uuid;

#[path = "support/plot.rs"]
mod plot;

const WORDS: usize = 1000;
const DROP_FRACTION: f64 = 0.05;
const RATE: f64 = 0.1;

/// One measured configuration.
#[derive(Clone, Copy)]
struct Row {
    sites: u32,
    sparse: bool,
    degree: u32,
    threshold: u32,
    site_sent: f64,
    site_received: f64,
    site_ms: f64,
    coord_received: f64,
    coord_sent: f64,
    coord_ms: f64,
}

fn json_len<T: serde::Serialize>(value: &T) -> f64 {
    serde_json::to_vec(value).map_or(0.0, |v| v.len() as f64)
}

fn ms(start: Instant) -> f64 {
    start.elapsed().as_secs_f64() * 1e3
}

fn run(sites: u32, sparse: bool, seed: u64) -> Row {
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let study = Uuid::from_u128(u128::from(seed));
    let threshold = (2 * sites).div_ceil(3);
    let s = sites as usize;
    let mut time = vec![0.0; s];
    let (mut sent, mut received) = (vec![0.0; s], vec![0.0; s]);
    let mut sessions: Vec<SiteSession> = (1..=sites)
        .map(|i| SiteSession::new(study, i, 1, &mut rng))
        .collect();
    let participants: Vec<Participant> = sessions
        .iter()
        .map(|site| Participant {
            index: site.index(),
            name: format!("site-{}", site.index()),
            encryption_public_key: site.encryption_public_key(),
            mask_public_keys: site.mask_public_keys(),
            signing_public_key: String::new(),
            seed_commitment: String::new(),
        })
        .collect();
    let spec = sparse.then(|| {
        let mut graph_seed = [0u8; 32];
        rng.fill_bytes(&mut graph_seed);
        GraphSpec::new(graph_seed, sites, RATE, RATE).expect("feasible")
    });
    // Key exchange: a site publishes its keys once and receives those of its peers.
    let key_bytes = json_len(&participants[0]);
    let peers = spec.map_or(s - 1, |g| g.degree as usize) as f64;
    let mut inboxes: Vec<Vec<ShareBox>> = vec![Vec::new(); s];
    for (i, session) in sessions.iter_mut().enumerate() {
        let start = Instant::now();
        let boxes = match &spec {
            None => session.share_boxes(&participants, threshold, &mut rng),
            Some(spec) => session.share_boxes_sparse(&participants, threshold, spec, &mut rng),
        }
        .expect("deal");
        time[i] += ms(start);
        sent[i] += key_bytes + json_len(&boxes);
        received[i] += peers * key_bytes;
        for b in boxes {
            inboxes[b.to as usize - 1].push(b);
        }
    }
    for (i, (session, inbox)) in sessions.iter_mut().zip(&inboxes).enumerate() {
        let start = Instant::now();
        session.receive_inbox(inbox).expect("inbox");
        time[i] += ms(start);
        received[i] += json_len(inbox);
    }
    let aggregator = match &spec {
        None => Aggregator::new(study, threshold, &participants, 1),
        Some(spec) => Aggregator::new_sparse(study, threshold, &participants, 1, spec),
    }
    .expect("aggregator");
    let roster: Vec<u32> = (1..=sites).collect();
    let mut order = roster.clone();
    order.shuffle(&mut rng);
    let gone: BTreeSet<u32> = order[..(DROP_FRACTION * f64::from(sites)).ceil() as usize]
        .iter()
        .copied()
        .collect();
    let mut masked = BTreeMap::new();
    for (i, session) in sessions.iter_mut().enumerate() {
        let site = i as u32 + 1;
        if gone.contains(&site) {
            continue;
        }
        let input: Vec<u64> = (0..WORDS).map(|_| rng.next_u64() >> 8).collect();
        let start = Instant::now();
        let z = session.mask(1, &roster, &input).expect("mask");
        time[i] += ms(start);
        let bytes: Vec<u8> = z.iter().flat_map(|w| w.to_le_bytes()).collect();
        sent[i] += wire::encode(&bytes).len() as f64;
        masked.insert(site, z);
    }
    let survivors: Vec<u32> = masked.keys().copied().collect();
    let dropped: Vec<u32> = gone.iter().copied().collect();
    let request = json_len(&(&survivors, &dropped));
    let mut responses: BTreeMap<u32, UnmaskRequest> = BTreeMap::new();
    for &site in &survivors {
        let i = site as usize - 1;
        let start = Instant::now();
        let answer = sessions[i]
            .unmask_response(1, &roster, &survivors, &dropped, threshold)
            .expect("unmask");
        time[i] += ms(start);
        received[i] += request;
        sent[i] += json_len(&answer);
        responses.insert(site, answer);
    }
    let start = Instant::now();
    aggregator
        .unmask_sum(1, &roster, &masked, &responses)
        .expect("sum");
    let coord_ms = ms(start);
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    Row {
        sites,
        sparse,
        degree: spec.map_or(sites - 1, |g| g.degree),
        threshold: spec.map_or(threshold, |g| g.threshold),
        site_sent: mean(&sent),
        site_received: mean(&received),
        site_ms: mean(&time),
        // The coordinator receives what the sites send and sends what they receive.
        coord_received: sent.iter().sum(),
        coord_sent: received.iter().sum(),
        coord_ms,
    }
}

fn table(rows: &[Row]) -> String {
    let mut out = String::from(
        "| protocol | S | k | t | site sends (kB) | site receives (kB) | site CPU (ms) | coordinator receives (MB) | coordinator sends (MB) | coordinator CPU (ms) |\n|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        let name = if r.sparse { "SecAgg+" } else { "complete" };
        out.push_str(&format!(
            "| {name} | {} | {} | {} | {:.1} | {:.1} | {:.1} | {:.2} | {:.2} | {:.1} |\n",
            r.sites,
            r.degree,
            r.threshold,
            r.site_sent / 1e3,
            r.site_received / 1e3,
            r.site_ms,
            r.coord_received / 1e6,
            r.coord_sent / 1e6,
            r.coord_ms
        ));
    }
    out
}

fn write_doc(root: &Path, rows: &[Row]) {
    let path = root.join("docs/performance-secagg-plus.md");
    let Ok(doc) = std::fs::read_to_string(&path) else {
        eprintln!("no {}", path.display());
        return;
    };
    let (start, end) = ("<!-- bench:start -->\n", "<!-- bench:end -->");
    match (doc.find(start), doc.find(end)) {
        (Some(a), Some(b)) if a < b => {
            let updated = format!("{}{}{}{}", &doc[..a + start.len()], table(rows), "\n", &doc[b..]);
            if std::fs::write(&path, updated).is_ok() {
                eprintln!("wrote {}", path.display());
            }
        }
        _ => eprintln!("{} has no bench markers", path.display()),
    }
}

fn series(rows: &[Row], sparse: bool, name: &str, value: fn(&Row) -> f64) -> plot::Series {
    plot::Series {
        name: name.to_string(),
        points: rows
            .iter()
            .filter(|r| r.sparse == sparse)
            .map(|r| (f64::from(r.sites), value(r)))
            .collect(),
    }
}

fn figures(root: &Path, rows: &[Row]) {
    type Pick = fn(&Row) -> f64;
    let charts: [(&str, &str, &str, Pick, Pick); 2] = [
        (
            "secagg_plus_bytes.png",
            "Secure aggregation, one round of 1000 words: bytes vs S",
            "bytes (sent + received)",
            |r| r.site_sent + r.site_received,
            |r| r.coord_sent + r.coord_received,
        ),
        (
            "secagg_plus_time.png",
            "Secure aggregation, one round of 1000 words: CPU time vs S",
            "CPU time (ms)",
            |r| r.site_ms,
            |r| r.coord_ms,
        ),
    ];
    for (file, title, y_label, site, coordinator) in charts {
        let chart = plot::Chart {
            title,
            x_label: "sites S",
            y_label,
            log_x: true,
            log_y: true,
            y_range: None,
        };
        let lines = [
            series(rows, false, "complete, per site", site),
            series(rows, true, "SecAgg+, per site", site),
            series(rows, false, "complete, coordinator", coordinator),
            series(rows, true, "SecAgg+, coordinator", coordinator),
        ];
        let path = root.join("docs/img").join(file);
        match plot::line_chart(&path, &chart, &lines) {
            Ok(()) => eprintln!("wrote {}", path.display()),
            Err(e) => eprintln!("no figure: {e}"),
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let given = |name: &str| args.iter().find_map(|a| a.strip_prefix(name));
    // `--sites=S` and `--protocol=complete|sparse` run one configuration and write nothing.
    let one_size: Option<u32> = given("--sites=").map(|s| s.parse().expect("--sites=S: a number"));
    let protocols: Vec<bool> = match given("--protocol=") {
        None => vec![false, true],
        Some("complete") => vec![false],
        Some("sparse") => vec![true],
        Some(other) => panic!("--protocol={other}: expected complete or sparse"),
    };
    let quick = args.iter().any(|a| a == "--quick") || one_size.is_some() || protocols.len() == 1;
    let sizes: Vec<u32> = match one_size {
        Some(s) => vec![s],
        None if quick => vec![10, 100],
        None => vec![10, 100, 1000],
    };
    let mut rows = Vec::new();
    for &sites in &sizes {
        for &sparse in &protocols {
            let measured = run(sites, sparse, u64::from(sites));
            eprintln!("{}", table(&[measured]));
            rows.push(measured);
        }
    }
    rows.sort_by_key(|r| (r.sparse, r.sites));
    println!("{}", table(&rows));
    if quick {
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    write_doc(root, &rows);
    figures(root, &rows);
}

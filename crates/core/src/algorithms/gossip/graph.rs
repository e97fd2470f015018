//! The agents' network for `gossip_power`: mixing matrices and average consensus (D-DP-PM,
//! seed 001 §II-B, Assumption 2 and eq. 11; Scaglione et al. 2008).
//!
//! A mixing matrix W (m×m) is accepted when it satisfies Assumption 2 of the paper:
//! (i) W_ij > 0 only on edges, (ii) symmetric (undirected graph), (iii) doubly stochastic
//! (nonnegative, rows, hence columns, sum to 1), (iv) connected. We also require that
//! consensus converges, i.e. the second-largest eigenvalue modulus
//! SLEM(W) = max(|λ₂(W)|, |λ_m(W)|) < 1: a connected W can still have the eigenvalue −1 (a
//! bipartite graph with zero self-weights), and then W^K never approaches 11ᵀ/m. The paper's
//! "consequence of Assumption 2" (‖W − 11ᵀ/m‖₂ < 1) needs exactly this.
//!
//! Named graphs get Metropolis–Hastings weights, W_ij = 1/(1 + max(deg_i, deg_j)) on edges and
//! W_ii = 1 − Σ_{j≠i} W_ij, which are symmetric, doubly stochastic and have positive self-weights
//! (so SLEM < 1 whenever the graph is connected).
//!
//! K rounds of gossip replace agent i's value z_i by (W^K z)_i; after them each agent holds the
//! network mean up to an error that contracts like SLEM(W)^K (eq. 11 and App. A-A1).
//! Everything here is public: W depends on the parameters only.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;
use serde::{Deserialize, Serialize};

use crate::linalg::{Matrix, try_sym_eigenvalues};

/// Tolerance on symmetry and row sums of a user-given mixing matrix.
pub const TOLERANCE: f64 = 1e-9;
/// A mixing matrix whose SLEM is within this of 1 does not reach consensus in useful time.
pub const MIN_SPECTRAL_GAP: f64 = 1e-9;

/// How the client describes the network: a named graph (Metropolis weights) or a matrix.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum GraphSpec {
    /// Agent i talks to i ± 1 (mod m).
    Ring,
    /// Agent i talks to i ± 1, no wrap-around.
    Path,
    /// Agent 0 talks to every other agent.
    Star,
    /// Every pair of agents talks.
    Complete,
    /// Each pair is an edge with probability p, drawn from a ChaCha20 generator seeded with
    /// `seed` (public: the graph is a parameter, not a secret).
    ErdosRenyi { p: f64, seed: u64 },
    /// A user-given mixing matrix, one array per row.
    Matrix(Vec<Vec<f64>>),
}

impl GraphSpec {
    /// Every named graph's wire name, for the parameter schema.
    pub const NAMES: [&'static str; 4] = ["ring", "path", "star", "complete"];
}

/// Why a graph or matrix was refused (reported on `params.graph`).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct GraphError(pub String);

/// A validated mixing matrix (Assumption 2 plus SLEM < 1).
#[derive(Debug, Clone, PartialEq)]
pub struct Mixing {
    w: Matrix,
    slem: f64,
}

impl Mixing {
    /// Builds and validates the mixing matrix of `spec` for `m` agents.
    pub fn build(spec: &GraphSpec, m: usize) -> Result<Self, GraphError> {
        let w = match spec {
            GraphSpec::Ring => metropolis(&ring(m), m),
            GraphSpec::Path => metropolis(&(1..m).map(|i| (i - 1, i)).collect::<Vec<_>>(), m),
            GraphSpec::Star => metropolis(&(1..m).map(|i| (0, i)).collect::<Vec<_>>(), m),
            GraphSpec::Complete => metropolis(&complete(m), m),
            GraphSpec::ErdosRenyi { p, seed } => {
                let edges = erdos_renyi(m, *p, *seed)?;
                if !connected(m, &edges) {
                    return Err(GraphError(format!(
                        "the Erdős–Rényi graph drawn with p = {p} and seed = {seed} is disconnected for {m} agents; raise p or change the seed"
                    )));
                }
                metropolis(&edges, m)
            }
            GraphSpec::Matrix(rows) => from_rows(rows, m)?,
        };
        Self::new(w)
    }

    /// Validates a mixing matrix against Assumption 2 and SLEM < 1.
    pub fn new(w: Matrix) -> Result<Self, GraphError> {
        let m = w.nrows();
        if w.ncols() != m || m == 0 {
            return Err(GraphError("the mixing matrix must be square".into()));
        }
        if !w.iter().all(|v| v.is_finite()) {
            return Err(GraphError("the mixing matrix has a non-finite entry".into()));
        }
        if let Some(v) = w.iter().find(|v| !(**v >= 0.0)) {
            return Err(GraphError(format!(
                "the mixing matrix must be nonnegative (found {v})"
            )));
        }
        for i in 0..m {
            for j in 0..i {
                let ok = (w[(i, j)] - w[(j, i)]).abs() <= TOLERANCE;
                if !ok {
                    return Err(GraphError(format!(
                        "the mixing matrix must be symmetric (entries ({i}, {j}) = {} and ({j}, {i}) = {} differ)",
                        w[(i, j)],
                        w[(j, i)]
                    )));
                }
            }
        }
        for (i, row) in w.row_iter().enumerate() {
            let sum: f64 = row.iter().sum();
            let ok = (sum - 1.0).abs() <= TOLERANCE;
            if !ok {
                return Err(GraphError(format!(
                    "the mixing matrix must be doubly stochastic (row {i} sums to {sum}, not 1)"
                )));
            }
        }
        let edges: Vec<(usize, usize)> = (0..m)
            .flat_map(|i| (0..i).map(move |j| (j, i)))
            .filter(|&(i, j)| w[(i, j)] > 0.0)
            .collect();
        if !connected(m, &edges) {
            return Err(GraphError(
                "the graph of the mixing matrix (its positive off-diagonal entries) is disconnected: some agents can never hear from the others".into(),
            ));
        }
        let slem = slem(&w)?;
        if !(slem <= 1.0 - MIN_SPECTRAL_GAP) {
            return Err(GraphError(format!(
                "gossip with this mixing matrix never reaches consensus (second-largest eigenvalue modulus {slem:.6}, e.g. −1 for a bipartite graph with zero self-weights); give the agents positive self-weights"
            )));
        }
        Ok(Self { w, slem })
    }

    /// The number of agents m.
    pub fn agents(&self) -> usize {
        self.w.nrows()
    }

    /// The matrix W.
    pub fn matrix(&self) -> &Matrix {
        &self.w
    }

    /// The rows of W, for storing with a configuration.
    pub fn rows(&self) -> Vec<Vec<f64>> {
        self.w.row_iter().map(|r| r.iter().copied().collect()).collect()
    }

    /// SLEM(W) = max(|λ₂|, |λ_m|): the per-round contraction of the disagreement (eq. 11).
    pub fn slem(&self) -> f64 {
        self.slem
    }

    /// The spectral gap 1 − SLEM(W).
    pub fn spectral_gap(&self) -> f64 {
        1.0 - self.slem
    }

    /// The fewest rounds K with SLEM^K ≤ `contraction` (at least 1, at most `max`).
    pub fn rounds_for(&self, contraction: f64, max: u32) -> u32 {
        if !(self.slem > 0.0) {
            return 1;
        }
        let k = (contraction.ln() / self.slem.ln()).ceil();
        if k >= f64::from(max) {
            max
        } else {
            (k as u32).max(1)
        }
    }

    /// K rounds of average consensus: each round replaces z_i by Σ_j W_ij z_j, for all agents
    /// at once (synchronous gossip, eq. 11). Only neighbours (W_ij > 0) contribute.
    pub fn gossip(&self, states: &[Matrix], rounds: u32) -> Vec<Matrix> {
        let m = self.agents();
        assert_eq!(states.len(), m, "one state per agent");
        let mut current = states.to_vec();
        for _ in 0..rounds {
            current = (0..m)
                .map(|i| {
                    let weights: Vec<f64> = self.w.row(i).iter().copied().collect();
                    let others: Vec<(usize, &Matrix)> =
                        current.iter().enumerate().filter(|(j, _)| *j != i).collect();
                    mix_row(&weights, i, &current[i], &others)
                })
                .collect();
        }
        current
    }
}

/// One gossip step of agent `own`: Σ_j W_ij·Z_j over j ascending with W_ij > 0, from its own
/// state and its neighbours' (`inputs`, by agent index; a missing neighbour counts as zero).
/// Simulated gossip ([`Mixing::gossip`]) and a live agent (`gossip::agent`) both step with it.
pub fn mix_row(weights: &[f64], own: usize, own_state: &Matrix, inputs: &[(usize, &Matrix)]) -> Matrix {
    let mut next = Matrix::zeros(own_state.nrows(), own_state.ncols());
    for (j, &weight) in weights.iter().enumerate() {
        if weight > 0.0 {
            let state = if j == own {
                Some(own_state)
            } else {
                inputs.iter().find(|(i, _)| *i == j).map(|(_, s)| *s)
            };
            if let Some(state) = state {
                next += state * weight;
            }
        }
    }
    next
}

/// Edges of the ring on m agents (for m = 2, the single edge).
fn ring(m: usize) -> Vec<(usize, usize)> {
    let mut edges: Vec<(usize, usize)> = (0..m)
        .map(|i| {
            let j = (i + 1) % m;
            (i.min(j), i.max(j))
        })
        .filter(|(i, j)| i != j)
        .collect();
    edges.sort_unstable();
    edges.dedup();
    edges
}

fn complete(m: usize) -> Vec<(usize, usize)> {
    (0..m).flat_map(|i| (i + 1..m).map(move |j| (i, j))).collect()
}

/// G(m, p) from a seeded ChaCha20 generator, pairs visited in lexicographic order.
fn erdos_renyi(m: usize, p: f64, seed: u64) -> Result<Vec<(usize, usize)>, GraphError> {
    if !(p > 0.0 && p <= 1.0) {
        return Err(GraphError(format!(
            "erdos_renyi.p must satisfy 0 < p ≤ 1 (got {p})"
        )));
    }
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    Ok(complete(m)
        .into_iter()
        .filter(|_| rng.random::<f64>() < p)
        .collect())
}

/// Metropolis–Hastings weights on an undirected edge list.
fn metropolis(edges: &[(usize, usize)], m: usize) -> Matrix {
    let mut degree = vec![0_usize; m];
    for &(i, j) in edges {
        degree[i] += 1;
        degree[j] += 1;
    }
    let mut w = Matrix::zeros(m, m);
    for &(i, j) in edges {
        let weight = 1.0 / (1 + degree[i].max(degree[j])) as f64;
        w[(i, j)] = weight;
        w[(j, i)] = weight;
    }
    for i in 0..m {
        let off: f64 = (0..m).filter(|&j| j != i).map(|j| w[(i, j)]).sum();
        w[(i, i)] = 1.0 - off;
    }
    w
}

/// A user-given matrix from its rows; must be m×m.
fn from_rows(rows: &[Vec<f64>], m: usize) -> Result<Matrix, GraphError> {
    if rows.len() != m || rows.iter().any(|r| r.len() != m) {
        return Err(GraphError(format!(
            "the mixing matrix must be {m}×{m}, one row and one column per agent"
        )));
    }
    Ok(Matrix::from_fn(m, m, |i, j| rows[i][j]))
}

/// Whether the undirected graph on m nodes is connected (depth-first search from node 0).
fn connected(m: usize, edges: &[(usize, usize)]) -> bool {
    let mut adjacency = vec![Vec::new(); m];
    for &(i, j) in edges {
        adjacency[i].push(j);
        adjacency[j].push(i);
    }
    let mut seen = vec![false; m];
    let mut stack = vec![0];
    seen[0] = true;
    while let Some(i) = stack.pop() {
        for &j in &adjacency[i] {
            if !seen[j] {
                seen[j] = true;
                stack.push(j);
            }
        }
    }
    seen.iter().all(|&s| s)
}

/// SLEM(W) for a symmetric doubly stochastic W: every eigenvalue but the (simple) top one, 1.
fn slem(w: &Matrix) -> Result<f64, GraphError> {
    if w.nrows() == 1 {
        return Ok(0.0);
    }
    let mut values: Vec<f64> = try_sym_eigenvalues(w)
        .map_err(|_| GraphError("the mixing matrix's eigenvalues did not converge".into()))?
        .iter()
        .copied()
        .collect();
    values.sort_by(|a, b| b.total_cmp(a));
    Ok(values[1].abs().max(values[values.len() - 1].abs()))
}

#[cfg(test)]
#[path = "graph_tests.rs"]
mod tests;

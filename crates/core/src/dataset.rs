//! Dataset domain types shared by the algorithms, the store and the HTTP layer: what a dataset
//! is (its kind), who is protected (its neighbouring relation) and the public bounds
//! (docs/design/privacy.md §1). Pure types, no I/O.

use serde::{Deserialize, Serialize};

/// What the uploaded data is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// X ∈ R^{n×d}, one row per individual.
    Records,
    /// A symmetric m×m matrix.
    Matrix,
}

/// The neighbouring relation: what one individual's change to the data may look like.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Relation {
    /// One row replaced by any other row; n is public.
    ReplaceOne,
    /// One row added or removed; n is private.
    AddRemove,
    /// A' = A + C with C symmetric and sqrt(Σ_i ‖C_i:‖₁²) ≤ u (Nicolas et al. eq. 12).
    Entry,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Records => "records",
            Kind::Matrix => "matrix",
        }
    }
}

impl Relation {
    pub fn as_str(self) -> &'static str {
        match self {
            Relation::ReplaceOne => "replace_one",
            Relation::AddRemove => "add_remove",
            Relation::Entry => "entry",
        }
    }

    /// Whether this relation applies to datasets of `kind`.
    pub fn fits(self, kind: Kind) -> bool {
        matches!(
            (kind, self),
            (Kind::Records, Relation::ReplaceOne | Relation::AddRemove) | (Kind::Matrix, Relation::Entry)
        )
    }
}

/// The unit of privacy with its public bounds, resolved (defaults filled in).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "relation", rename_all = "snake_case")]
pub enum Neighbours {
    /// Records, one row replaced; rows clipped to ‖x‖₂ ≤ beta and ‖x‖₁ ≤ alpha.
    ReplaceOne { beta: f64, alpha: f64 },
    /// Records, one row added or removed; rows clipped to ‖x‖₂ ≤ beta and ‖x‖₁ ≤ alpha.
    AddRemove { beta: f64, alpha: f64 },
    /// Symmetric matrix, entry-bounded change with bound u.
    Entry { u: f64 },
}

impl Neighbours {
    pub fn relation(&self) -> Relation {
        match self {
            Neighbours::ReplaceOne { .. } => Relation::ReplaceOne,
            Neighbours::AddRemove { .. } => Relation::AddRemove,
            Neighbours::Entry { .. } => Relation::Entry,
        }
    }

    pub fn kind(&self) -> Kind {
        match self {
            Neighbours::Entry { .. } => Kind::Matrix,
            _ => Kind::Records,
        }
    }
}

/// Everything public an algorithm may know about its input: shape, unit of privacy, bounds.
/// Built by the caller from the dataset's metadata; never contains statistics of the data.
/// Serialisable because a live study's plan is kept with it (public facts only).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct DataContext {
    /// Number of features d (records) or the side m (matrix).
    pub d: usize,
    /// Number of records when it is public (records with `replace_one`, or a public dataset);
    /// `None` when n itself is private (`add_remove`) and for matrices.
    pub n: Option<usize>,
    pub neighbours: Neighbours,
    /// `public: true` datasets carry no budget; exact PCA and seeds are allowed on them.
    pub public: bool,
    /// The matrix is stored sparse (uploaded as Matrix Market): a fact of the upload's format,
    /// public like the shape.
    pub sparse: bool,
}

impl DataContext {
    pub fn kind(&self) -> Kind {
        self.neighbours.kind()
    }
    pub fn relation(&self) -> Relation {
        self.neighbours.relation()
    }
}

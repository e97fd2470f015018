use super::*;

#[test]
fn the_sparse_algorithms_are_the_power_methods_and_exact() {
    let mut sparse: Vec<&str> = registry()
        .iter()
        .map(|a| a.info())
        .filter(|i| i.sparse)
        .map(|i| i.name)
        .collect();
    sparse.sort_unstable();
    assert_eq!(sparse, ["coherent_power", "exact", "noisy_power"]);
}

#[test]
fn a_dense_only_algorithm_is_refused_on_sparse_data_only() {
    let gauss = super::super::find("analyze_gauss").expect("listed").info();
    assert_eq!(check_storage(gauss, false), Ok(()));
    let Err(ConfigError::Unsupported(message)) = check_storage(gauss, true) else {
        panic!("analyze_gauss must be refused on sparse data");
    };
    assert!(
        message.contains("`analyze_gauss` needs the dense matrix"),
        "{message}"
    );
    assert!(message.contains("noisy_power"), "{message}");
    let power = super::super::find("noisy_power").expect("listed").info();
    assert_eq!(check_storage(power, true), Ok(()));
}

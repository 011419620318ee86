//! Which embedded device profile a GPU's driver name selects (`mkc run` and `bench` compile
//! and predict with it).

use mkc_ir::embedded::device_for_gpu;

fn profile(gpu: &str) -> Option<String> {
    device_for_gpu(gpu).map(|d| d.name)
}

#[test]
fn driver_names_select_their_profiles() {
    assert_eq!(profile("NVIDIA H100 80GB HBM3").as_deref(), Some("h100"));
    assert_eq!(profile("NVIDIA H100 NVL").as_deref(), Some("h100"));
    assert_eq!(profile("NVIDIA H200").as_deref(), Some("h200"));
    assert_eq!(profile("NVIDIA A100-SXM4-80GB").as_deref(), Some("a100"));
    assert_eq!(profile("NVIDIA B200").as_deref(), Some("b200"));
}

#[test]
fn a_gpu_without_a_profile_selects_none() {
    assert_eq!(profile("NVIDIA GeForce RTX 4090"), None);
    // A profile's name must be a whole word of the driver's name.
    assert_eq!(profile("NVIDIA H1000"), None);
    assert_eq!(profile(""), None);
}

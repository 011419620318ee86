//! The occupancy rule on gpu.md's driver-verified examples and more hand-computed cases.

use mkc_ir::device::Arch;
use mkc_simulator::occupancy::{
    co_resident, occupancy, ArchRules, CannotLaunch, CtaResources, Limiter,
};

fn k(threads: u32, registers: u32, dynamic_smem: u32) -> CtaResources {
    CtaResources {
        threads,
        registers,
        static_smem: 0,
        dynamic_smem,
    }
}

fn blocks(arch: Arch, r: CtaResources, carveout: Option<u32>) -> (u32, Limiter) {
    let o = occupancy(&ArchRules::of(arch), &r, carveout).expect("launchable");
    (o.blocks_per_sm, o.limiter)
}

#[test]
fn gpu_md_examples() {
    // 640 threads at 88 registers: 1 CTA; at 37 registers: 2 CTAs (25,600 registers each).
    assert_eq!(
        blocks(Arch::Sm90, k(640, 88, 0), None),
        (1, Limiter::Registers)
    );
    assert_eq!(
        blocks(Arch::Sm90, k(640, 37, 0), None),
        (2, Limiter::Registers)
    );
    // 128 threads with 113 KiB dynamic: 2 CTAs; with 114 KiB: 1.
    assert_eq!(
        blocks(Arch::Sm90, k(128, 32, 113 * 1024), None),
        (2, Limiter::SharedMemory)
    );
    assert_eq!(
        blocks(Arch::Sm90, k(128, 32, 114 * 1024), None),
        (1, Limiter::SharedMemory)
    );
}

#[test]
fn register_allocation_uses_sub_partitions() {
    // 256 threads (8 warps) at 32 registers: 1024 per warp, 16 warps per sub-partition, 64
    // warps in all: 8 CTAs; registers and warps tie, registers reported first.
    let o = occupancy(&ArchRules::of(Arch::Sm90), &k(256, 32, 0), None).unwrap();
    assert_eq!((o.blocks_per_sm, o.limiter), (8, Limiter::Registers));
    assert_eq!(
        (o.limits.registers, o.limits.warps, o.limits.blocks),
        (8, 8, 32)
    );
    // 96 threads (3 warps) at 40 registers: 1280 per warp -> 12 per sub-partition -> 48 warps
    // -> 16 CTAs, whereas the naive 65536 / (40 * 96) would say 17.
    let o = occupancy(&ArchRules::of(Arch::Sm90), &k(96, 40, 0), None).unwrap();
    assert_eq!(o.limits.registers, 16);
    // 1024 threads at 64 registers: exactly one CTA.
    assert_eq!(
        blocks(Arch::Sm90, k(1024, 64, 0), None),
        (1, Limiter::Registers)
    );
    // Tiny CTAs hit the CTA limit.
    assert_eq!(
        blocks(Arch::Sm90, k(32, 16, 0), None),
        (32, Limiter::Blocks)
    );
    assert_eq!(
        blocks(Arch::Sm86, k(32, 16, 0), None),
        (16, Limiter::Blocks)
    );
}

#[test]
fn warps_bind_on_consumer_parts() {
    // sm_86 and sm_89 hold 48 warps: a 1024-thread CTA fits once, on sm_90 twice.
    assert_eq!(
        blocks(Arch::Sm86, k(1024, 16, 0), None),
        (1, Limiter::Warps)
    );
    assert_eq!(blocks(Arch::Sm89, k(512, 16, 0), None), (3, Limiter::Warps));
    assert_eq!(
        blocks(Arch::Sm90, k(1024, 16, 0), None),
        (2, Limiter::Warps)
    );
    assert_eq!(
        blocks(Arch::Sm120, k(768, 16, 0), None),
        (2, Limiter::Warps)
    );
}

#[test]
fn carveout_rounds_up_to_a_supported_size() {
    // 40 KiB + 1 KiB reserved = 41,984 B per CTA. Full 228 KiB: 5 CTAs. A 50% preference
    // (116,736 B) rounds up to 132 KiB: 3 CTAs.
    let r = k(128, 32, 40 * 1024);
    assert_eq!(blocks(Arch::Sm90, r, None).0, 5);
    assert_eq!(blocks(Arch::Sm90, r, Some(50)).0, 3);
    assert_eq!(blocks(Arch::Sm90, r, Some(100)).0, 5);
    // The preference is a hint: 0% with a CTA that needs more takes the smallest carveout
    // holding one CTA (64 KiB here), not a refusal.
    assert_eq!(blocks(Arch::Sm90, r, Some(0)), (1, Limiter::SharedMemory));
    // A CTA of 2 KiB (1 KiB dynamic + 1 KiB reserved) under 0%: 8 KiB, 4 CTAs.
    assert_eq!(blocks(Arch::Sm90, k(128, 32, 1024), Some(0)).0, 4);
    // sm_80: 164 KiB per SM.
    assert_eq!(blocks(Arch::Sm80, r, None).0, 4);
}

/// Configurations where the driver (`mkc probe occupancy` on our H200) answered what a rule
/// that ignored the 1 KiB reserved for a CTA without shared memory did not.
#[test]
fn the_reserved_kilobyte_counts_under_a_small_carveout() {
    // (threads, registers, carveout %, CTAs per SM the driver answered)
    for (threads, regs, pct, driver) in [
        (63, 40, 6, 16),
        (86, 56, 2, 8),
        (14, 48, 3, 8),
        (55, 24, 1, 8),
        (8, 120, 1, 8),
        (89, 72, 0, 8),
        (12, 80, 0, 8),
        (11, 56, 7, 16),
    ] {
        assert_eq!(
            blocks(Arch::Sm90, k(threads, regs, 0), Some(pct)).0,
            driver,
            "{threads} threads x {regs} registers at {pct}%"
        );
    }
}

#[test]
fn device_profiles_supply_the_limits() {
    let h200 = mkc_ir::embedded::resolve_device("h200").unwrap();
    assert_eq!(ArchRules::for_device(&h200), ArchRules::of(Arch::Sm90));
    // A profile whose SM holds 100 KiB of shared memory and 16 CTAs: both limits bind.
    let mut small = h200.clone();
    small.limits.smem_per_sm = 100 * 1024;
    small.limits.ctas_per_sm = 16;
    let rules = ArchRules::for_device(&small);
    let o = occupancy(&rules, &k(128, 32, 40 * 1024), None).unwrap();
    assert_eq!(o.blocks_per_sm, 2);
    assert_eq!(
        occupancy(&rules, &k(32, 16, 0), None)
            .unwrap()
            .blocks_per_sm,
        16
    );
    // A CTA larger than the profile's SM cannot launch.
    let e = occupancy(&rules, &k(128, 32, 120 * 1024), None).unwrap_err();
    assert!(matches!(e, CannotLaunch::Carveout { .. }), "{e}");
}

#[test]
fn kernels_that_cannot_launch_say_why() {
    let rules = ArchRules::of(Arch::Sm90);
    // 1024 threads at 65 registers: 2,304 per warp x 32 warps > 65,536.
    let e = occupancy(&rules, &k(1024, 65, 0), None).unwrap_err();
    assert!(
        matches!(e, CannotLaunch::RegistersPerBlock { needed: 73728, .. }),
        "{e}"
    );
    assert!(matches!(
        occupancy(&rules, &k(128, 256, 0), None).unwrap_err(),
        CannotLaunch::RegistersPerThread { .. }
    ));
    assert!(matches!(
        occupancy(&rules, &k(1056, 32, 0), None).unwrap_err(),
        CannotLaunch::Threads { .. }
    ));
    // Opt-in maximum: 227 KiB on sm_90, 163 KiB on sm_80.
    assert!(occupancy(&rules, &k(128, 32, 232_448), None).is_ok());
    let e = occupancy(&rules, &k(128, 32, 232_449), None).unwrap_err();
    assert!(e.to_string().contains("opt-in"), "{e}");
    assert!(occupancy(
        &ArchRules::of(Arch::Sm80),
        &k(128, 32, 163 * 1024 + 1),
        None
    )
    .is_err());
}

#[test]
fn co_residency_follows_the_sum_rule() {
    let rules = ArchRules::of(Arch::Sm90);
    let big = k(640, 88, 216_504);
    assert!(!co_resident(&rules, &big, 1, &big, 1, Some(100)));
    // The anchors' shrunk kernel: 37 registers, small shared memory: two fit together.
    let small = k(640, 37, 64 * 1024);
    assert!(co_resident(&rules, &small, 1, &small, 1, Some(100)));
    assert!(
        !co_resident(&rules, &small, 2, &small, 1, Some(100)),
        "registers run out"
    );
    // Shared memory: 120 KiB + 110 KiB exceeds 228 KiB.
    assert!(!co_resident(
        &rules,
        &k(128, 32, 120 * 1024),
        1,
        &k(128, 32, 110 * 1024),
        1,
        None
    ));
}

/// Pairs measured on our H200 with `mkc probe coresidency` (resident: one CTA per SM with
/// 120 KiB of shared memory; visitor: none): whether the visitor's CTAs entered beside the
/// resident ones on all 132 SMs or on none. The first four share an SM although charging each
/// kernel ceil(warps / 4) warps per sub-partition says they cannot.
#[test]
fn co_residency_matches_the_measured_warp_placement() {
    let rules = ArchRules::of(Arch::Sm90);
    // (resident threads, registers, visitor threads, registers, admitted on the H200)
    let measured = [
        (288, 112, 288, 88, true),
        (288, 128, 288, 64, true),
        (288, 120, 288, 72, true),
        (288, 120, 256, 72, true),
        (256, 128, 512, 64, true),
        (288, 128, 288, 80, false),
        (288, 120, 288, 80, false),
        (288, 120, 256, 80, false),
        (288, 168, 256, 48, false),
        (256, 128, 512, 72, false),
    ];
    for (ta, ra, tb, rb, admitted) in measured {
        assert_eq!(
            co_resident(
                &rules,
                &k(ta, ra, 120 * 1024),
                1,
                &k(tb, rb, 0),
                1,
                Some(100)
            ),
            admitted,
            "{ta} x {ra} beside {tb} x {rb}"
        );
    }
}

proptest::proptest! {
    /// For one kernel the pair rule is the single-kernel rule: j + k CTAs of it fit together
    /// exactly when the occupancy allows j + k.
    #[test]
    fn co_residency_of_one_kernel_is_its_occupancy(
        threads in 1u32..=1024,
        registers in 16u32..=255,
        smem in 0u32..=120_000,
        j in 0u32..4,
        extra in 1u32..4,
    ) {
        let rules = ArchRules::of(Arch::Sm90);
        let cta = k(threads, registers, smem);
        if let Ok(o) = occupancy(&rules, &cta, Some(100)) {
            proptest::prop_assert_eq!(
                co_resident(&rules, &cta, j, &cta, extra, Some(100)),
                o.blocks_per_sm >= j + extra
            );
        }
    }
}

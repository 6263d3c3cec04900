use super::*;

/// QSA_KERNEL expands to `extern "C"`: kernels made by a macro are found, other
/// extern "C" functions (not returning void, or not definitions of a name) are not.
#[test]
fn kernel_names_from_preprocessed_text() {
    let pre = "extern \"C\" void qsa_a(const float* __restrict__ q, int n) { }\n\
               extern \"C\" void  qsa_b (int x) {} extern \"C\" void qsa_a(int) {}\n\
               extern \"C\" int not_a_kernel(int);\nextern \"C\" { void inside(); }\n\
               extern \"C\" voidish(int);\n";
    let names: Vec<String> = kernel_decls(pre).into_iter().map(|k| k.name).collect();
    assert_eq!(names, ["qsa_a", "qsa_b"]);
    let src = include_str!("../../kernels/topk.cu");
    assert_eq!(dynamic_shared_names(src), ["topk_dyn"]);
}

/// emu_cluster.h's scan spelling of QSA_CLUSTER_DIMS gives the kernel's cluster size;
/// a size that is not a number is 0 (refused at launch), never a dropped kernel.
#[test]
fn cluster_sizes_from_the_scan_marker() {
    let pre = "extern \"C\" qsa_emu_cluster_dims(8) void qsa_c(int n) {}\n\
               extern \"C\"   qsa_emu_cluster_dims( 4u )  void qsa_d(int n) {}\n\
               extern \"C\" void qsa_plain(int n) {}\n\
               extern \"C\" qsa_emu_cluster_dims(2 * 2) void qsa_expr(int n) {}\n";
    let decls: Vec<(String, u32)> = kernel_decls(pre)
        .into_iter()
        .map(|k| (k.name, k.cluster))
        .collect();
    let want = [
        ("qsa_c", 8),
        ("qsa_d", 4),
        ("qsa_plain", 1),
        ("qsa_expr", 0),
    ];
    let want: Vec<(String, u32)> = want.iter().map(|&(n, c)| (n.into(), c)).collect();
    assert_eq!(decls, want);
}

#[test]
fn own_text_keeps_the_source_file_only() {
    let pre = "# 1 \"k/a.cu\"\nA1\n# 1 \"k/common/emu.h\" 1\nH1\n# 5 \"k/a.cu\" 2\nA2\n";
    assert_eq!(own_text(pre, "k/a.cu"), "A1\nA2\n");
}

#[test]
fn asm_instructions_in_source_order_once_each() {
    let text = r#"asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d));
        asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x)); my_asm(1); plasm ("x");
        asm volatile ( "cp.async.cg.shared.global [%0];" );"#;
    assert_eq!(
        asm_instructions(text),
        ["cp.async.cg.shared.global", "cvt.rna.tf32.f32"]
    );
}

/// Failures caused only by what the emulator does not model name it; any other error
/// (a kernel that does not compile as C++) is not excused.
#[test]
fn unemulated_names_instructions_and_refuses_real_errors() {
    let own = "asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(f) : \"h\"(h));";
    let impossible = "a.cu:63:3: error: impossible constraint in \u{2018}asm\u{2019}\n";
    assert_eq!(
        unemulated(impossible, own),
        Some(vec!["cvt.f32.f16".to_string()])
    );
    let cvta = "a.cu:214:20: error: \u{2018}__cvta_generic_to_shared\u{2019} was not declared in this scope\n\
                a.cu:214:20: note: something\n";
    assert_eq!(
        unemulated(cvta, own),
        Some(vec![
            "cvt.f32.f16".to_string(),
            "__cvta_generic_to_shared".to_string()
        ])
    );
    let gas = "/tmp/cc1.s: Assembler messages:\n/tmp/cc1.s:9: Error: no such instruction: `mma.sync.aligned'\n";
    assert!(unemulated(gas, own).is_some());
    let real = "a.cu:52:9: error: \u{2018}float4\u{2019} does not name a type\n";
    assert_eq!(unemulated(real, own), None);
    let user = "a.cu:1:1: error: 'qv' was not declared in this scope\n";
    assert_eq!(unemulated(user, own), None);
    let mixed = format!("{impossible}{real}");
    assert_eq!(unemulated(&mixed, own), None);
}

//! Compiles kernels/common/portable.h for the host (g++ through the `cc` crate, -DQSA_HOST)
//! with the extern "C" wrappers of shim/portable_host.cpp. Warnings are errors, as they are
//! for the device builds.

fn main() {
    let header = "../kernels/common/portable.h";
    let shim = "shim/portable_host.cpp";
    println!("cargo:rerun-if-changed={header}");
    println!("cargo:rerun-if-changed={shim}");
    cc::Build::new()
        .cpp(true)
        .std("c++17")
        .file(shim)
        .define("QSA_HOST", None)
        // Integer and bit-cast helpers only: no fast-math, no contraction matters, but say so.
        .flag("-ffp-contract=off")
        .opt_level(3)
        .warnings(true)
        .extra_warnings(true)
        .warnings_into_errors(true)
        // `#pragma unroll` is nvcc's and clang's; g++ spells it `#pragma GCC unroll`. An
        // unroll hint cannot change a result, so only that warning is off.
        .flag("-Wno-unknown-pragmas")
        .try_compile("qsa_portable_host")
        .unwrap_or_else(|e| {
            // A missing g++ is the usual cause on a fresh machine; say so before cc's detail.
            eprintln!(
                "error: cannot compile kernels/common/portable.h for the host: {e}\n\
                 hostcheck needs a C++17 compiler (g++): `cargo xtask setup` installs it, \
                 or `apt-get install g++`"
            );
            std::process::exit(1);
        });
}

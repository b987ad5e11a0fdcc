//! The shared library carries Debian's soname, so programs linked against
//! the system libpcap (NEEDED libpcap.so.0.8) load it in its place.
fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libpcap.so.0.8");
}

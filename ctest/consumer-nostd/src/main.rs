//! Links the crate without its default features: a std program over the
//! no_std rlib (its panic handler and allocator are std's), calling an
//! export through the rlib: rsverbs_detach_mcast(NULL, ...) is EINVAL.
fn main() {
    // SAFETY: NULL is refused at the door (EINVAL), nothing is read.
    let rc = unsafe { rsverbs::capi::rsverbs_detach_mcast(std::ptr::null_mut(), std::ptr::null(), 0) };
    assert_eq!(rc, libc_einval());
    println!("consumer-nostd: rsverbs_detach_mcast(NULL) = {rc}");
}

fn libc_einval() -> i32 {
    22
}

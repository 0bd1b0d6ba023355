//! The on-disk cache of compiled kernels and tuning records: one file per key, written
//! atomically, with a header that lets a truncated, corrupt or stale file be detected and rebuilt
//! instead of loaded. Nothing here touches the GPU or NVRTC, so it is tested on any machine.

use std::ffi::OsString;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// First bytes of every cache file.
const MAGIC: [u8; 8] = *b"STNCUBIN";
/// Layout version of cache files; bump it when the header or the keying changes.
const FORMAT: u32 = 1;
/// Header: magic, format, body length (u64), key (u128), body checksum (u128), little-endian.
const HEADER: usize = 8 + 4 + 8 + 16 + 16;

/// 128-bit FNV-1a over length-prefixed parts: stable across Rust versions and platforms
/// (unlike std's `DefaultHasher`), and prefixing lengths keeps `["ab", "c"]` and `["a", "bc"]`
/// apart. Used for cache keys and cache-file checksums; not cryptographic.
pub(crate) fn hash128(parts: &[&[u8]]) -> u128 {
    const PRIME: u128 = 0x0000_0000_0100_0000_0000_0000_0000_013B;
    let mut h: u128 = 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d;
    for part in parts {
        for &b in (part.len() as u64).to_le_bytes().iter().chain(part.iter()) {
            h = (h ^ b as u128).wrapping_mul(PRIME);
        }
    }
    h
}

/// A directory of cached kernel binaries, keyed by a 128-bit hash of everything that determines
/// them. Best effort: a file that cannot be written is skipped, one that fails its checks is
/// rebuilt and overwritten.
#[derive(Clone, Debug)]
pub struct DiskCache {
    dir: PathBuf,
    extension: &'static str,
}

impl DiskCache {
    /// A cache of kernel binaries (`.cubin` files) in `dir` (created on first write).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        DiskCache { dir: dir.into(), extension: "cubin" }
    }

    /// A cache in the subdirectory `name` of this one whose files end in `.{name}` (e.g. the
    /// tuning records next to the kernels).
    pub fn subcache(&self, name: &'static str) -> Self {
        DiskCache { dir: self.dir.join(name), extension: name }
    }

    /// The cache the environment asks for: `$STENCIL_CACHE_DIR`, else
    /// `$XDG_CACHE_HOME/stencil-dsl`, else `$HOME/.cache/stencil-dsl`, else none.
    pub fn from_env() -> Option<Self> {
        cache_dir_from(|name| std::env::var_os(name)).map(DiskCache::new)
    }

    /// The cache directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The keys of the entries in the directory (valid or not), in no particular order.
    pub fn keys(&self) -> Vec<u128> {
        let suffix = format!(".{}", self.extension);
        let Ok(entries) = fs::read_dir(&self.dir) else { return Vec::new() };
        entries
            .filter_map(|e| {
                let name = e.ok()?.file_name().into_string().ok()?;
                let hex = name.strip_suffix(&suffix)?;
                (hex.len() == 32).then(|| u128::from_str_radix(hex, 16).ok()).flatten()
            })
            .collect()
    }

    /// The file holding `key`.
    pub fn path(&self, key: u128) -> PathBuf {
        self.dir.join(format!("{key:032x}.{}", self.extension))
    }

    /// The body stored under `key`, or `None` when the file is missing or fails any check
    /// (length, magic, format version, key, checksum).
    pub fn read(&self, key: u128) -> Option<Vec<u8>> {
        let mut bytes = fs::read(self.path(key)).ok()?;
        let (header, body) = bytes.split_at_checked(HEADER)?;
        let u64_at = |i: usize| u64::from_le_bytes(header[i..i + 8].try_into().expect("8 bytes"));
        let u128_at = |i: usize| u128::from_le_bytes(header[i..i + 16].try_into().expect("16 bytes"));
        let valid = header[..8] == MAGIC
            && header[8..12] == FORMAT.to_le_bytes()
            && u64_at(12) == body.len() as u64
            && u128_at(20) == key
            && u128_at(36) == hash128(&[body]);
        valid.then(|| bytes.split_off(HEADER))
    }

    /// Stores `body` under `key`: writes a temporary file in the directory, then renames it over
    /// the entry, so readers see the old file or the whole new one, never a partial write.
    pub fn write(&self, key: u128, body: &[u8]) -> io::Result<()> {
        static SEQ: AtomicU64 = AtomicU64::new(0);
        fs::create_dir_all(&self.dir)?;
        let seq = SEQ.fetch_add(1, Ordering::Relaxed);
        let tmp = self.dir.join(format!(".{key:032x}.{}.{seq}.tmp", std::process::id()));
        let mut file = Vec::with_capacity(HEADER + body.len());
        file.extend_from_slice(&MAGIC);
        file.extend_from_slice(&FORMAT.to_le_bytes());
        file.extend_from_slice(&(body.len() as u64).to_le_bytes());
        file.extend_from_slice(&key.to_le_bytes());
        file.extend_from_slice(&hash128(&[body]).to_le_bytes());
        file.extend_from_slice(body);
        let written =
            fs::File::create(&tmp).and_then(|mut f| f.write_all(&file)).and_then(|_| fs::rename(&tmp, self.path(key)));
        if written.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        written
    }

    /// The valid entry for `key`, or the result of `build`, stored for next time (a failed
    /// store is ignored: the cache only saves time). The flag says whether the entry came from
    /// disk.
    pub fn get_or_build<E>(&self, key: u128, build: impl FnOnce() -> Result<Vec<u8>, E>) -> Result<(Vec<u8>, bool), E> {
        if let Some(body) = self.read(key) {
            return Ok((body, true));
        }
        let body = build()?;
        let _ = self.write(key, &body);
        Ok((body, false))
    }
}

/// The cache directory from environment variables read through `var` (empty values count as
/// unset).
fn cache_dir_from(var: impl Fn(&str) -> Option<OsString>) -> Option<PathBuf> {
    let set = |name: &str| var(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    set("STENCIL_CACHE_DIR")
        .or_else(|| set("XDG_CACHE_HOME").map(|d| d.join("stencil-dsl")))
        .or_else(|| set("HOME").map(|d| d.join(".cache").join("stencil-dsl")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    fn scratch(name: &str) -> DiskCache {
        let dir = std::env::temp_dir().join(format!("stencil-cache-test-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        DiskCache::new(dir)
    }

    #[test]
    fn builds_once_then_reads_back_and_rebuilds_damaged_entries() {
        let cache = scratch("damage");
        let calls = Cell::new(0);
        let build = || -> Result<Vec<u8>, ()> {
            calls.set(calls.get() + 1);
            Ok(b"cubin bytes".to_vec())
        };
        let get = || cache.get_or_build(7, build).unwrap();
        assert_eq!(get(), (b"cubin bytes".to_vec(), false));
        assert_eq!(get(), (b"cubin bytes".to_vec(), true));
        assert_eq!(calls.get(), 1);

        let good = fs::read(cache.path(7)).unwrap();
        let mut flipped = good.clone();
        *flipped.last_mut().unwrap() ^= 1;
        let mut wrong_magic = good.clone();
        wrong_magic[0] = b'X';
        let mut stale = good.clone();
        stale[8] = FORMAT as u8 + 1;
        let damaged = [flipped, good[..good.len() - 3].to_vec(), good[..10].to_vec(), wrong_magic, stale, Vec::new()];
        for (i, bad) in damaged.into_iter().enumerate() {
            fs::write(cache.path(7), bad).unwrap();
            assert_eq!(cache.read(7), None, "damaged entry {i} accepted");
            assert_eq!(get(), (b"cubin bytes".to_vec(), false), "damaged entry {i} not rebuilt");
            assert_eq!(fs::read(cache.path(7)).unwrap(), good, "damaged entry {i} not overwritten");
        }
        assert_eq!(calls.get(), 7);
        assert_eq!(cache.keys(), vec![7]);
        let sub = cache.subcache("tune");
        sub.write(7, b"record").unwrap();
        assert_eq!((sub.read(7), sub.keys()), (Some(b"record".to_vec()), vec![7]));
        assert!(sub.path(7).ends_with(format!("tune/{:032x}.tune", 7u128)));
        assert_eq!(cache.keys(), vec![7], "the subcache's files are not the kernels'");
        fs::remove_dir_all(sub.dir()).unwrap();

        // An entry copied under another key is rejected too.
        fs::copy(cache.path(7), cache.path(8)).unwrap();
        assert_eq!(cache.read(8), None);
        // Build errors pass through and store nothing.
        assert_eq!(cache.get_or_build(9, || Err::<Vec<u8>, _>("nvrtc failed")), Err("nvrtc failed"));
        assert!(!cache.path(9).exists());
        let leftovers = fs::read_dir(cache.dir())
            .unwrap()
            .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().ends_with(".tmp"));
        assert_eq!(leftovers.count(), 0);
        fs::remove_dir_all(cache.dir()).unwrap();
    }

    #[test]
    fn unwritable_cache_still_builds() {
        let cache = DiskCache::new("/proc/stencil-cache-cannot-exist");
        assert_eq!(cache.get_or_build(1, || Ok::<_, ()>(vec![1, 2])), Ok((vec![1, 2], false)));
    }

    #[test]
    fn keys_separate_parts_and_directory_follows_environment() {
        assert_ne!(hash128(&[b"ab", b"c"]), hash128(&[b"a", b"bc"]));
        assert_eq!(hash128(&[b"stencil"]), hash128(&[b"stencil"]));
        let env = |vars: &'static [(&'static str, &'static str)]| {
            cache_dir_from(move |n| vars.iter().find(|(k, _)| *k == n).map(|(_, v)| OsString::from(v)))
        };
        assert_eq!(env(&[("STENCIL_CACHE_DIR", "/c"), ("HOME", "/h")]), Some(PathBuf::from("/c")));
        assert_eq!(env(&[("STENCIL_CACHE_DIR", ""), ("XDG_CACHE_HOME", "/x")]), Some(PathBuf::from("/x/stencil-dsl")));
        assert_eq!(env(&[("HOME", "/h")]), Some(PathBuf::from("/h/.cache/stencil-dsl")));
        assert_eq!(env(&[]), None);
    }
}

//! Directory walks over random trees of files, directories and symbolic links (loops
//! included): the walk ends, and every regular file is read exactly once.

use std::collections::BTreeSet;
use std::path::PathBuf;

use gpuwise_sources::input::expand;
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Node {
    Dir,
    File,
    /// A link to an earlier node (possibly an ancestor: a loop).
    Link(prop::sample::Index),
}

fn node() -> impl Strategy<Value = (prop::sample::Index, Node)> {
    (
        any::<prop::sample::Index>(),
        prop_oneof![
            Just(Node::Dir),
            Just(Node::File),
            any::<prop::sample::Index>().prop_map(Node::Link)
        ],
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn walks_end_and_read_each_file_once(nodes in prop::collection::vec(node(), 1..30)) {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path().join("root");
        std::fs::create_dir(&root).expect("root");
        // Every node goes under a directory made before it.
        let mut dirs: Vec<PathBuf> = vec![root.clone()];
        let mut all: Vec<PathBuf> = vec![root.clone()];
        let mut files = BTreeSet::new();
        for (i, (parent, kind)) in nodes.iter().enumerate() {
            let dir = dirs[parent.index(dirs.len())].clone();
            let path = dir.join(format!("n{i}"));
            match kind {
                Node::Dir => {
                    std::fs::create_dir(&path).expect("dir");
                    dirs.push(path.clone());
                }
                Node::File => {
                    std::fs::write(&path, format!("file {i}\n")).expect("file");
                    files.insert(std::fs::canonicalize(&path).expect("canonical"));
                }
                Node::Link(to) => {
                    let target = all[to.index(all.len())].clone();
                    std::os::unix::fs::symlink(&target, &path).expect("link");
                }
            }
            all.push(path);
        }
        let found = match expand(&[root.display().to_string()]) {
            Ok(f) => f,
            Err(_) => {
                // No file at all under the root is the only error.
                prop_assert!(files.is_empty());
                return Ok(());
            }
        };
        let read: Vec<PathBuf> = found
            .iter()
            .map(|i| std::fs::canonicalize(i.path.as_ref().expect("a file")).expect("canonical"))
            .collect();
        let unique: BTreeSet<PathBuf> = read.iter().cloned().collect();
        prop_assert_eq!(read.len(), unique.len(), "no file twice");
        prop_assert_eq!(unique, files, "every file once");
    }
}

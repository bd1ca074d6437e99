internal import CStrataLMDB

/// Whether the file open as `descriptor` still has a name in its file system (`fstat`'s link
/// count above 0): false once it was deleted, while the descriptor keeps it alive; nil if it
/// can't be read.
func openFileIsLinked(_ descriptor: Int32) -> Bool? {
    let count = strata_link_count(descriptor)
    guard count >= 0 else { return nil }
    return count > 0
}

import Foundation

/// The temporary directory — `TMPDIR`, else `/tmp` — for a command's scratch files, which
/// must exist: one the user named is used, never made (before, `verify`, `migrate` and
/// `doctor` created a missing `TMPDIR` with its parents and left it behind).
///
/// - Throws: `CommandFailure` naming it when it doesn't exist or isn't a directory.
func existingTemporaryDirectory() throws -> String {
    let path = NSTemporaryDirectory()
    var isDirectory: ObjCBool = false
    guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue else {
        let shown = path.count > 1 && path.hasSuffix("/") ? String(path.dropLast()) : path
        throw CommandFailure(
            "the temporary directory \(shown) (TMPDIR) doesn't exist or isn't a directory: strata doesn't make it; create it, or set TMPDIR to a directory that exists")
    }
    return path
}

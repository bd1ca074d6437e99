import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Whether the file open as `descriptor` still has a name in its file system (`fstat`'s link
/// count above 0): false once it was deleted, while the descriptor keeps it alive; nil if it
/// can't be read.
func openFileIsLinked(_ descriptor: Int32) -> Bool? {
    var status = stat()
    guard fstat(descriptor, &status) == 0 else { return nil }
    return status.st_nlink > 0
}

import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A small tmpfs mounted for one test, unmounted (lazily, so an open file can't keep it) when
/// the value is released; nil where mounting isn't permitted (a container without
/// CAP_SYS_ADMIN), so a test can skip with a message.
public final class SmallFileSystem {
    public let directory: TemporaryDirectory
    public let path: String

    public init?(kilobytes: Int) throws {
        guard getuid() == 0 else { return nil }
        directory = try TemporaryDirectory("strata-small-fs")
        path = directory.file("fs")
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        guard mount("tmpfs", path, "tmpfs", 0, "size=\(kilobytes)k") == 0 else { return nil }
    }

    public func file(_ name: String) -> String { (path as NSString).appendingPathComponent(name) }

    /// Fills the file system with a filler file, leaving about `leaving` bytes free.
    public func fill(leaving: Int) throws {
        let size = max(0, freeBytes - leaving)
        guard FileManager.default.createFile(atPath: file("filler"), contents: Data(count: size)) else { throw POSIXError(.ENOSPC) }
    }

    /// Removes the filler file.
    public func drain() throws { try FileManager.default.removeItem(atPath: file("filler")) }

    deinit { umount2(path, 2) }  // MNT_DETACH

    /// The bytes this user may still write on it.
    public var freeBytes: Int {
        var status = statvfs()
        guard statvfs(path, &status) == 0 else { return 0 }
        return Int(status.f_bavail) * Int(status.f_frsize)
    }
}

import Foundation
import StrataModel
import Synchronization
import Testing

@testable import Strata

/// ``RowSlots`` holds a row's values in storage it manages itself (not an array): these
/// check what an array gave for free — value semantics, and values released with the row.
@Suite("Contexts: row slots")
struct RowSlotsTests {
    /// Set when the bytes of a `Data` made by ``data(_:)`` are freed.
    final class Released: Sendable {
        let flag = Mutex(false)
        var isSet: Bool { flag.withLock { $0 } }
    }

    /// 64 bytes whose storage reports its release to `released`.
    func data(_ released: Released) -> Data {
        let bytes = UnsafeMutableRawPointer.allocate(byteCount: 64, alignment: 8)
        bytes.initializeMemory(as: UInt8.self, repeating: 7, count: 64)
        return Data(bytesNoCopy: bytes, count: 64, deallocator: .custom { pointer, _ in
            pointer.deallocate()
            released.flag.withLock { $0 = true }
        })
    }

    @Test("slots start nil; a copy is independent of the original, whichever way either is written")
    func valueSemantics() {
        var original = RowSlots(count: 3)
        #expect(original.count == 3)
        #expect((0..<3).allSatisfy { original[$0] == nil })
        let long = String(repeating: "x", count: 40)
        original[1] = .attribute(.string(long))
        var copy = original
        copy[1] = .attribute(.int64(2))
        copy.withUnsafeMutableBufferPointer { $0[2] = .attribute(.boolean(true)) }
        #expect(original[1] == .attribute(.string(long)))
        #expect(original[2] == nil)
        #expect(copy[1] == .attribute(.int64(2)))
        #expect(copy[2] == .attribute(.boolean(true)))
        // Writing through the buffer of the original leaves the copy.
        original.withUnsafeMutableBufferPointer { $0[0] = .toOne(nil) }
        #expect(copy[0] == nil)
        #expect(original[0] == .toOne(nil))
    }

    @Test("a row's values are released with the last copy of it, not before")
    func valuesReleased() {
        let released = Released()
        do {
            var row = RowSlots(count: 2)
            row[0] = .attribute(.binaryData(data(released)))
            var copy: RowSlots? = row
            row[1] = .attribute(.int16(1))  // the original now has its own storage
            #expect(!released.isSet)
            copy = nil
            _ = copy
            #expect(!released.isSet)  // still held by the original
            #expect(row[0] != nil)
        }
        #expect(released.isSet)
    }

    @Test("a slot out of range stops at once instead of reading past the row")
    func slotOutOfRange() async {
        await #expect(processExitsWith: .failure) {
            let row = RowSlots(count: 2)
            _ = row[2]
        }
    }
}

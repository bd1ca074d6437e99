import Foundation
import StrataLog
import StrataStorage
import StrataTestSupport
import Testing

@Suite("strata info on a damaged store")
struct InfoDamageCommandTests {
    @Test("a damaged manifest entry: info prints every part it can read, names the segments as unreadable (text and JSON), and exits 1")
    func damagedManifestEntry() throws {
        let store = try makeLeagueStore(extraTransactions: 30)
        let head: UInt64
        do {
            let log = try EventLog(openingExistingAt: store.path, readOnly: false)
            try log.compact(CompactionRequest(before: 11))
            head = try log.head
        }
        do {
            var options = LMDBEnvironment.Options()
            options.maxDatabases = 32
            let environment = try LMDBEnvironment(path: store.path, databases: [DatabaseDescriptor("segments")], options: options)
            try environment.write { txn in
                let segments = try environment.database(named: "segments")
                let first: [UInt8] = [0, 0, 0, 0, 0, 0, 0, 1]
                #expect(try txn.value(forKey: first, in: segments) != nil, "the manifest entry of the segment starting at 1")
                try txn.put([UInt8](repeating: 7, count: 30), forKey: first, in: segments)
            }
        }
        let text = try strata("info", store.path)
        #expect(text.status == 1, "\(text.standardOutput)")
        #expect(text.standardOutput.contains("head         \(head)"), "\(text.standardOutput)")
        #expect(text.standardOutput.contains("objects      "), "\(text.standardOutput)")
        #expect(text.standardOutput.contains("segments     can't be read: "), "\(text.standardOutput)")
        #expect(text.standardOutput.contains("checkpoints  "), "\(text.standardOutput)")
        #expect(text.standardError.contains("the store is damaged: segments can't be read; `strata verify"), "\(text.standardError)")

        let json = try strata("info", store.path, "--format", "json")
        #expect(json.status == 1)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.standardOutput.utf8)) as? [String: Any])
        #expect(object["head"] as? Int == Int(head))
        #expect(object["segments"] == nil, "a part that can't be read is left out, not shown empty")
        let damaged = try #require(object["damaged"] as? [String: String])
        #expect(damaged["segments"]?.isEmpty == false)
        #expect(object["objects"] != nil)
    }
}

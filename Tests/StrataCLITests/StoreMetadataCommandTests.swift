import Foundation
import Strata
import StrataStorage
import StrataTestSupport
import Testing

/// `strata info` shows the user's store metadata (spec 0007), set by the app through the
/// coordinator and read here by another process — the `strata` binary.
@Suite("strata info: user metadata")
struct StoreMetadataCommandTests {
    @Test("metadata set through a coordinator is shown by info, text and JSON (the stored typed form), in another process")
    func infoShowsMetadata() throws {
        let store = try makeLeagueStore()
        do {
            let coordinator = PersistentStoreCoordinator(managedObjectModel: try EventLog(openingExistingAt: store.path).model)
            let added = try coordinator.addPersistentStore(type: .eventLog, at: URL(fileURLWithPath: store.path))
            var metadata = coordinator.metadata(for: added)
            metadata["appVersion"] = "2.1"
            metadata["revision"] = 42
            metadata["lastSync"] = .date(Date(timeIntervalSinceReferenceDate: 788_918_400.5))
            metadata["token"] = .data(Data([0xde, 0xad]))
            metadata["flags"] = ["beta", true]
            try coordinator.setMetadata(metadata, for: added)
            try coordinator.remove(added)
        }

        let text = try strata("info", store.path)
        #expect(text.status == 0, "\(text.standardError)")
        let lines = text.standardOutput.split(separator: "\n").map(String.init)
        let start = try #require(lines.firstIndex(of: "metadata     5 keys"), "\(text.standardOutput)")
        #expect(Array(lines[(start + 1)...].prefix(5)) == [
            "  appVersion  \"2.1\" (string)",
            "  flags       [\"beta\", true] (array)",
            "  lastSync    2026-01-01T00:00:00.500000Z (date)",
            "  revision    42 (integer)",
            "  token       2 bytes dead (data)",
        ])

        let json = try strata("info", store.path, "--format", "json")
        #expect(json.status == 0, "\(json.standardError)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.standardOutput.utf8)) as? [String: Any])
        let metadata = try #require(object["metadata"] as? [String: Any], "\(json.standardOutput)")
        #expect(metadata.count == 5)
        #expect(metadata["appVersion"] as? [String: String] == ["string": "2.1"])
        #expect(metadata["revision"] as? [String: String] == ["integer": "42"])
        #expect(metadata["lastSync"] as? [String: String] == ["date": "788918400.5"])
        #expect(metadata["token"] as? [String: String] == ["data": "3q0="])
        let flags = try #require((metadata["flags"] as? [String: Any])?["array"] as? [[String: Any]])
        #expect(flags.count == 2 && flags[0]["string"] as? String == "beta" && flags[1]["boolean"] as? Bool == true)
        // What the JSON shows decodes to what was set.
        let decoded = try MetadataValue.decode(try JSONSerialization.data(withJSONObject: metadata))
        #expect(decoded["lastSync"] == .date(Date(timeIntervalSinceReferenceDate: 788_918_400.5)))
        #expect(decoded["flags"] == ["beta", true])
    }

    @Test("a store without user metadata: `metadata     none` and an empty JSON object")
    func infoWithoutMetadata() throws {
        let store = try makeLeagueStore()
        let text = try strata("info", store.path)
        #expect(text.status == 0)
        #expect(text.standardOutput.contains("\nmetadata     none\n"), "\(text.standardOutput)")
        let json = try strata("info", store.path, "--format", "json")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.standardOutput.utf8)) as? [String: Any])
        #expect((object["metadata"] as? [String: Any])?.isEmpty == true)
    }

    @Test("a damaged metadata row: info prints the rest, names the metadata as unreadable with the key at fault, exits 1")
    func infoWithDamagedMetadata() throws {
        let store = try makeLeagueStore()
        do {
            var options = LMDBEnvironment.Options()
            options.maxDatabases = 32
            let environment = try LMDBEnvironment(path: store.path, databases: [DatabaseDescriptor("meta")], options: options)
            let meta = try environment.database(named: "meta")
            try environment.write { txn in
                try txn.put(Array(#"{"count": {"integer": "many"}}"#.utf8), forKey: Array("userMetadata".utf8), in: meta)
            }
        }
        let text = try strata("info", store.path)
        #expect(text.status == 1)
        #expect(text.standardOutput.contains("metadata     can't be read: "), "\(text.standardOutput)")
        #expect(text.standardOutput.contains("\"count\""), "\(text.standardOutput)")
        #expect(text.standardOutput.contains("head         "), "\(text.standardOutput)")
        #expect(text.standardError.contains("metadata can't be read"), "\(text.standardError)")
        let json = try strata("info", store.path, "--format", "json")
        #expect(json.status == 1)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.standardOutput.utf8)) as? [String: Any])
        #expect(object["metadata"] == nil)
        #expect((object["damaged"] as? [String: String])?["metadata"]?.contains("\"count\"") == true)
    }
}

import Foundation
import StrataTestSupport
import Testing

/// `strata log --property` on a relationship side the store doesn't record, `replay --diff`'s
/// count of one object, and `demo` given empty text.
@Suite("strata log --property on an unrecorded side; replay --diff's count; demo \"\"")
struct LogPropertyCommandTests {
    @Test("--property naming the side the store derives (Team.players) is exit 1 naming the recorded side (Player.team); before, it silently matched nothing")
    func derivedSide() throws {
        let store = try makeLeagueStore()
        let refused = try strata("log", store.path, "--property", "players")
        #expect(refused.status == 1, "\(refused.standardOutput)")
        #expect(refused.standardError.contains("Team.players is the inverse of Player.team, which the store records"), "\(refused.standardError)")
        #expect(refused.standardError.contains("--property team"), "\(refused.standardError)")
        #expect(refused.standardOutput.isEmpty)
        // The recorded side selects the changes, and so do properties both kinds share.
        let recorded = try strata("log", store.path, "--property", "team")
        #expect(recorded.status == 0, "\(recorded.standardError)")
        #expect(recorded.standardOutput.contains("team:"), "\(recorded.standardOutput)")
        let lineup = try strata("log", store.path, "--property", "lineup")
        #expect(lineup.status == 0, "\(lineup.standardError)")
    }

    @Test("replay --diff of one changed object says \"1 object differs\"")
    func oneObjectDiffers() throws {
        let store = try makeLeagueStore()
        var counts: [String] = []
        for end in 2...7 {
            let result = try strata("replay", store.path, "--diff", "\(end - 1)..\(end)")
            #expect(result.status == 0, "\(result.standardError)")
            counts += result.standardOutput.split(separator: "\n").filter { $0.hasSuffix("differ") || $0.hasSuffix("differs") }.map(String.init)
        }
        #expect(counts.contains("1 object differs"), "\(counts)")
        #expect(!counts.contains { $0.hasPrefix("1 ") && !$0.hasSuffix("object differs") }, "\(counts)")
        #expect(counts.contains { !$0.hasPrefix("1 ") && $0.hasSuffix("objects differ") }, "\(counts)")
    }

    @Test("demo \"\" is a usage error naming the problem (before: exit 1 with the file system's raw error)")
    func demoEmptyDirectory() throws {
        let result = try strata("demo", "")
        #expect(result.status == 64, "\(result.standardOutput)\(result.standardError)")
        #expect(result.standardError.contains("the directory is empty text"), "\(result.standardError)")
    }
}

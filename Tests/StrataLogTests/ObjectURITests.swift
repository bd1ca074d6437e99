import Foundation
import StrataLog
import Testing

@Suite("Object URIs")
struct ObjectURITests {
    let store = UUID(uuidString: "6F1C2A3B-0000-4000-8000-00000000ABCD")!

    @Test("permanent and temporary URIs print in Core Data's shape and parse back")
    func roundTrip() throws {
        let id = StoredObjectID(entity: "Player", primaryKey: 12)
        let uri = ObjectURI.permanent(id, storeUUID: store)
        #expect(uri.absoluteString == "x-strata://6F1C2A3B-0000-4000-8000-00000000ABCD/Player/p12")
        #expect(ObjectURI.parse(uri) == .permanent(storeUUID: store, id: id))
        #expect(ObjectURI.storedObjectID(uri, storeUUID: store) == id)

        let temporaryID = UUID()
        let temporary = ObjectURI.temporary(entity: "Player", id: temporaryID)
        #expect(temporary.absoluteString == "x-strata:///Player/t\(temporaryID.uuidString)")
        #expect(ObjectURI.parse(temporary) == .temporary(entity: "Player", id: temporaryID))
        #expect(ObjectURI.storedObjectID(temporary, storeUUID: store) == nil)
    }

    @Test("another store's URI resolves to nil")
    func otherStore() {
        let uri = ObjectURI.permanent(StoredObjectID(entity: "Player", primaryKey: 1), storeUUID: UUID())
        #expect(ObjectURI.storedObjectID(uri, storeUUID: store) == nil)
    }

    @Test("malformed URIs resolve to nil", arguments: [
        "", "x-strata:", "x-coredata://6F1C2A3B-0000-4000-8000-00000000ABCD/Player/p1",
        "x-strata://6F1C2A3B-0000-4000-8000-00000000ABCD/Player", "x-strata://6F1C2A3B-0000-4000-8000-00000000ABCD/Player/p",
        "x-strata://6F1C2A3B-0000-4000-8000-00000000ABCD/Player/p0", "x-strata://6F1C2A3B-0000-4000-8000-00000000ABCD/Player/p01",
        "x-strata://6F1C2A3B-0000-4000-8000-00000000ABCD/Player/p-1", "x-strata://6F1C2A3B-0000-4000-8000-00000000ABCD/Player/p1x",
        "x-strata://6F1C2A3B-0000-4000-8000-00000000ABCD/Player/p99999999999999999999",
        "x-strata://6F1C2A3B-0000-4000-8000-00000000ABCD/Player/q1", "x-strata://not-a-uuid/Player/p1",
        "x-strata://6F1C2A3B-0000-4000-8000-00000000ABCD/Play er/p1", "x-strata://6F1C2A3B-0000-4000-8000-00000000ABCD/1Player/p1",
        "x-strata://6F1C2A3B-0000-4000-8000-00000000ABCD/Player/p1/extra", "x-strata:///Player/tnot-a-uuid",
        "x-strata:///Player/p1", "x-strata://6F1C2A3B-0000-4000-8000-00000000ABCD/Player/p１",
    ])
    func malformed(text: String) {
        #expect(ObjectURI.parse(text) == nil, "\(text)")
    }

    @Test("lower-case store UUIDs are accepted")
    func lowerCase() {
        let text = "x-strata://6f1c2a3b-0000-4000-8000-00000000abcd/Player/p3"
        #expect(ObjectURI.parse(text) == .permanent(storeUUID: store, id: StoredObjectID(entity: "Player", primaryKey: 3)))
    }
}

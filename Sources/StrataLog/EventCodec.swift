import Foundation
import StrataModel

/// Maps names to the store's small integer codes and back, and model versions to their
/// schemas: what the codec needs to write events and records compactly and read them
/// without the app's code.
protocol CodecCatalog {
    func entityCode(_ name: String) throws(LogError) -> UInt16
    func entityName(_ code: UInt16) throws(LogError) -> String
    func schema(forModelVersion version: Int) throws(LogError) -> ModelSchema
}

/// The binary encoding of events, values and state records (`Specs/0004-event-log.md` §2–3).
enum EventCodec {
    /// The largest magnitude of a stored timestamp, in microseconds since 1970: 9 × 10¹² s,
    /// the bound a commit holds drafts' timestamps to.
    static let maximumTimestampMicroseconds: UInt64 = 9_000_000_000_000_000_000

    /// The newest event format this build reads (and writes). An event is written in the
    /// oldest version that holds it: 3 when a change sets the paired side of a many-to-many
    /// ordered on both sides (which version 2 derived, never stored: spec 0004 §4.1), else 2
    /// when a group is marked not recorded for undo (group flag bit 2, which version 1
    /// doesn't have), else 1 — so a Strata that reads only older versions reads every other
    /// event and refuses that one naming its version, not as damage (spec 0004 §3.1).
    static let formatVersion: UInt8 = 3

    /// The format version `groups` are written in, with `schema` (the event's model
    /// version's) telling the paired sides (see ``formatVersion``).
    static func formatVersion(of groups: [ChangeGroup], schema: ModelSchema) -> UInt8 {
        if schema.hasPairedSides && groups.contains(where: { $0.changes.contains { touchesPairedSide($0, schema) } }) {
            return 3
        }
        return groups.contains { !$0.isRecordedForUndo } ? 2 : 1
    }

    /// Whether `change` sets (inserts, updates or deletes with) a paired side (spec 0004 §4.1).
    static func touchesPairedSide(_ change: Change, _ schema: ModelSchema) -> Bool {
        guard let entity = schema.entities[change.objectID.entity] else { return false }
        func paired(_ name: String) -> Bool { entity.propertiesByName[name]?.isPairedSide ?? false }
        switch change {
        case .insert(_, let values), .delete(_, let values): return values.keys.contains(where: paired)
        case .update(_, let changes): return changes.contains { paired($0.property) }
        }
    }
    /// "STEV".
    static let magic: [UInt8] = [0x53, 0x54, 0x45, 0x56]

    // MARK: - Value tags

    enum ValueTag: UInt8 {
        case null = 0x00
        case int16 = 0x01
        case int32 = 0x02
        case int64 = 0x03
        case decimal = 0x04
        case double = 0x05
        case float = 0x06
        case string = 0x07
        case falseValue = 0x08
        case trueValue = 0x09
        case date = 0x0A
        case binaryData = 0x0B
        case uuid = 0x0C
        case uri = 0x0D
        case transformable = 0x0E
        case reference = 0x10
        case references = 0x11
        case membership = 0x12

        /// The tag of byte `raw` (`init(rawValue:)` written out, so it is inlined where every
        /// value of every record is read: the synthesized initializer was a call each time).
        @inline(__always)
        static func of(_ raw: UInt8) -> ValueTag? {
            switch raw {
            case 0x00: .null
            case 0x01: .int16
            case 0x02: .int32
            case 0x03: .int64
            case 0x04: .decimal
            case 0x05: .double
            case 0x06: .float
            case 0x07: .string
            case 0x08: .falseValue
            case 0x09: .trueValue
            case 0x0A: .date
            case 0x0B: .binaryData
            case 0x0C: .uuid
            case 0x0D: .uri
            case 0x0E: .transformable
            case 0x10: .reference
            case 0x11: .references
            case 0x12: .membership
            default: nil
            }
        }
    }

    // MARK: - Values

    static func writeReference(_ id: StoredObjectID, _ w: inout ByteWriter, _ catalog: some CodecCatalog) throws(LogError) {
        w.varint(UInt64(try catalog.entityCode(id.entity)))
        w.varint(id.primaryKey)
    }

    static func readReference(_ r: inout ByteReader, _ catalog: some CodecCatalog) throws(LogError) -> StoredObjectID {
        let code = try r.varint()
        guard code <= UInt64(UInt16.max) else { throw r.failure("entity code \(code) out of range") }
        return StoredObjectID(entity: try catalog.entityName(UInt16(code)), primaryKey: try r.varint())
    }

    static func writeReferences(_ ids: [StoredObjectID], _ w: inout ByteWriter, _ catalog: some CodecCatalog) throws(LogError) {
        w.varint(ids.count)
        for id in ids { try writeReference(id, &w, catalog) }
    }

    static func readReferences(_ r: inout ByteReader, _ catalog: some CodecCatalog) throws(LogError) -> [StoredObjectID] {
        let n = try r.count(limit: r.remaining)
        var ids: [StoredObjectID] = []
        ids.reserveCapacity(n)
        for _ in 0..<n { ids.append(try readReference(&r, catalog)) }
        return ids
    }

    static func writeValue(_ value: LogValue, _ w: inout ByteWriter, _ catalog: some CodecCatalog) throws(LogError) {
        switch value {
        case .null: w.byte(ValueTag.null.rawValue)
        case .reference(let id):
            w.byte(ValueTag.reference.rawValue)
            try writeReference(id, &w, catalog)
        case .references(let ids):
            w.byte(ValueTag.references.rawValue)
            try writeReferences(ids, &w, catalog)
        case .attribute(let attribute):
            switch attribute {
            case .int16(let v):
                w.byte(ValueTag.int16.rawValue)
                w.uint16(UInt16(bitPattern: v))
            case .int32(let v):
                w.byte(ValueTag.int32.rawValue)
                w.uint32(UInt32(bitPattern: v))
            case .int64(let v):
                w.byte(ValueTag.int64.rawValue)
                w.uint64(UInt64(bitPattern: v))
            case .decimal(let v):
                w.byte(ValueTag.decimal.rawValue)
                w.string(v.description)
            case .double(let v):
                w.byte(ValueTag.double.rawValue)
                w.uint64(v.bitPattern)
            case .float(let v):
                w.byte(ValueTag.float.rawValue)
                w.uint32(v.bitPattern)
            case .string(let v):
                w.byte(ValueTag.string.rawValue)
                w.string(v)
            case .boolean(let v): w.byte(v ? ValueTag.trueValue.rawValue : ValueTag.falseValue.rawValue)
            case .date(let v):
                w.byte(ValueTag.date.rawValue)
                w.uint64(v.timeIntervalSinceReferenceDate.bitPattern)
            case .binaryData(let v):
                w.byte(ValueTag.binaryData.rawValue)
                w.data(v)
            case .uuid(let v):
                w.byte(ValueTag.uuid.rawValue)
                withUnsafeBytes(of: v.uuid) { w.raw($0) }
            case .uri(let v):
                w.byte(ValueTag.uri.rawValue)
                w.string(v.absoluteString)
            case .transformable(let v):
                w.byte(ValueTag.transformable.rawValue)
                w.data(v)
            }
        }
    }

    static func readValue(_ r: inout ByteReader, _ catalog: some CodecCatalog) throws(LogError) -> LogValue {
        let raw = try r.byte()
        guard let tag = ValueTag.of(raw) else { throw r.failure("unknown value tag 0x\(String(raw, radix: 16))") }
        switch tag {
        case .null: return .null
        case .int16: return .attribute(.int16(Int16(bitPattern: try r.uint16())))
        case .int32: return .attribute(.int32(Int32(bitPattern: try r.uint32())))
        case .int64: return .attribute(.int64(Int64(bitPattern: try r.uint64())))
        case .decimal:
            let text = try r.string()
            // Written as the decimal's own text: anything else (Decimal(string:) reads "12s45" as
            // 12) is damage, not a value.
            guard let decimal = Decimal(string: text, locale: Locale(identifier: "en_US_POSIX")), decimal.description == text else {
                throw r.failure("invalid decimal \"\(text)\"")
            }
            return .attribute(.decimal(decimal))
        case .double: return .attribute(.double(Double(bitPattern: try r.uint64())))
        case .float: return .attribute(.float(Float(bitPattern: try r.uint32())))
        case .string: return .attribute(.string(try r.string()))
        case .falseValue: return .attribute(.boolean(false))
        case .trueValue: return .attribute(.boolean(true))
        case .date: return .attribute(.date(Date(timeIntervalSinceReferenceDate: Double(bitPattern: try r.uint64()))))
        case .binaryData: return .attribute(.binaryData(Data(try r.data())))
        case .uuid:
            let b = Array(try r.rawBytes(16))
            return .attribute(.uuid(UUID(uuid: (b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]))))
        case .uri:
            let text = try r.string()
            // Written as the URI's absolute string: text URL(string:) would change (escaping a
            // control character) is damage, not that URI.
            guard let url = URL(string: text), url.absoluteString == text else { throw r.failure("invalid URI \"\(text)\"") }
            return .attribute(.uri(url))
        case .transformable: return .attribute(.transformable(Data(try r.data())))
        case .reference: return .reference(try readReference(&r, catalog))
        case .references: return .references(try readReferences(&r, catalog))
        case .membership: throw r.failure("a membership change where a value was expected")
        }
    }

    /// The kind of value a property holds, without payloads (``ModelSchema/Entity/valueKinds``):
    /// an attribute's type, a reference (a to-one), a list of references (a recorded
    /// to-many), or nothing but nil (a derived side).
    enum ValueKind: Sendable, Equatable {
        case int16, int32, int64, decimal, double, float, string, boolean, date, binaryData, uuid, uri, transformable
        case reference, references, nothing

        init(_ property: ModelSchema.Property) {
            if let type = property.attributeType {
                self.init(type)
            } else {
                switch property.relationship {
                case .toOne?: self = .reference
                case .orderedToMany?, .unorderedToMany?: self = .references
                case .derived?, nil: self = .nothing
                }
            }
        }

        /// The kind of an attribute type's values.
        init(_ type: AttributeType) {
            self = switch type {
            case .int16: .int16
            case .int32: .int32
            case .int64: .int64
            case .decimal: .decimal
            case .double: .double
            case .float: .float
            case .string: .string
            case .boolean: .boolean
            case .date: .date
            case .binaryData: .binaryData
            case .uuid: .uuid
            case .uri: .uri
            case .transformable: .transformable
            }
        }

        /// The kind of an attribute value (``AttributeValue/matches(_:)`` of a type is
        /// equality of kinds).
        @inline(__always)
        init(_ value: AttributeValue) {
            self = switch value {
            case .int16: .int16
            case .int32: .int32
            case .int64: .int64
            case .decimal: .decimal
            case .double: .double
            case .float: .float
            case .string: .string
            case .boolean: .boolean
            case .date: .date
            case .binaryData: .binaryData
            case .uuid: .uuid
            case .uri: .uri
            case .transformable: .transformable
            }
        }
    }

    /// Whether a property of kind `kind` can hold `value`: nil, an attribute value of its
    /// type, a reference for a to-one, a list for a recorded to-many. A value that can't be
    /// the property's is a damaged type tag or property code, refused rather than handed to
    /// readers.
    @inline(__always)
    static func fits(_ value: LogValue, _ kind: ValueKind) -> Bool {
        switch value {
        case .null: true
        case .attribute(let attribute): ValueKind(attribute) == kind
        case .reference: kind == .reference
        case .references: kind == .references
        }
    }

    /// The error for a value `property` of `entity` can't hold.
    @inline(never)
    static func misfit(_ value: LogValue, _ property: ModelSchema.Property, entity: String, _ r: ByteReader) -> LogError {
        let expected = property.attributeType.map { "a value of type \($0.name)" }
            ?? (property.relationship == .toOne ? "a reference" : property.isRecorded ? "a list of references" : "nothing (it is derived)")
        let got: String =
            switch value {
            case .attribute(let attribute): "a value of type \(attribute.typeName)"
            case .reference: "a reference"
            case .references: "a list of references"
            case .null: "nil"
            }
        return r.failure("\(entity).\(property.name) holds \(got), where \(expected) belongs")
    }

    // MARK: - Events

    /// The event's bytes: header, groups, and a CRC-32C over everything before it.
    static func encode(_ event: TransactionEvent, catalog: some CodecCatalog) throws(LogError) -> [UInt8] {
        let schema = try catalog.schema(forModelVersion: event.modelVersion)
        return try encode(event, catalog: catalog) { (group: Int, w: inout ByteWriter) throws(LogError) in
            for change in event.groups[group].changes {
                try writeChange(change, &w, schema: schema, catalog: catalog)
            }
        }
    }

    /// The event's bytes, with each group's changes written by `writeChanges` (given the
    /// group's position) — the commit's, encoded as it applied them.
    static func encode(
        _ event: TransactionEvent, catalog: some CodecCatalog, capacity: Int = 256,
        writeChanges: (Int, inout ByteWriter) throws(LogError) -> Void
    ) throws(LogError) -> [UInt8] {
        var w = ByteWriter(capacity: capacity)
        w.raw(magic)
        w.byte(formatVersion(of: event.groups, schema: try catalog.schema(forModelVersion: event.modelVersion)))
        var flags: UInt8 = 0
        if event.author != nil { flags |= 1 }
        if event.contextName != nil { flags |= 2 }
        w.byte(flags)
        w.uint64(event.sequence)
        w.uint64(UInt64(bitPattern: microseconds(event.timestamp) ?? 0))
        w.uint32(UInt32(bitPattern: event.processID))
        if let author = event.author { w.string(author) }
        if let contextName = event.contextName { w.string(contextName) }
        switch event.kind {
        case .save: w.byte(0)
        case .undo(let seq, let group):
            w.byte(1)
            w.varint(seq)
            w.varint(group)
        case .redo(let seq, let group):
            w.byte(2)
            w.varint(seq)
            w.varint(group)
        case .migration: w.byte(3)
        case .import: w.byte(4)
        case .reservation(let entity, let range):
            w.byte(5)
            w.varint(UInt64(try catalog.entityCode(entity)))
            w.varint(range.lowerBound)
            w.varint(range.upperBound)
        case .purge(let through):
            w.byte(6)
            w.varint(through)
        }
        w.varint(event.modelVersion)
        w.varint(event.groups.count)
        for (position, group) in event.groups.enumerated() {
            w.byte((group.actionName != nil ? 1 : 0) | (group.origin != nil ? 2 : 0) | (group.isRecordedForUndo ? 0 : 4))
            if let name = group.actionName { w.string(name) }
            switch group.origin {
            case .undo(let seq, let index)?:
                w.byte(1)
                w.varint(seq)
                w.varint(index)
            case .redo(let seq, let index)?:
                w.byte(2)
                w.varint(seq)
                w.varint(index)
            case nil: break
            }
            w.varint(group.changes.count)
            try writeChanges(position, &w)
        }
        let crc = w.bytes.withUnsafeBytes { CRC32C.checksum($0) }
        w.uint32(crc)
        return w.bytes
    }

    static func writeChange(
        _ change: Change, _ w: inout ByteWriter, schema: ModelSchema, catalog: some CodecCatalog
    ) throws(LogError) {
        let id = change.objectID
        let entity = try schema.entity(id.entity)
        func code(_ property: String) throws(LogError) -> Int {
            guard let p = entity.propertiesByName[property] else {
                throw .unknownProperty(entity: id.entity, property: property)
            }
            return p.code
        }
        switch change {
        case .insert(_, let values), .delete(_, let values):
            var sorted: [(code: Int, value: LogValue)] = []
            sorted.reserveCapacity(values.count)
            for (name, value) in values { sorted.append((try code(name), value)) }
            sorted.sort { $0.code < $1.code }
            writeImageStart(insert: change.isInsert, entityCode: try catalog.entityCode(id.entity), primaryKey: id.primaryKey, &w)
            try writeCodedValues(sorted, &w, catalog)
        case .update(_, let changes):
            w.byte(2)
            try writeReference(id, &w, catalog)
            w.varint(changes.count)
            for propertyChange in changes {
                switch propertyChange {
                case .value(let property, let before, let after):
                    w.varint(try code(property))
                    try writeValue(before, &w, catalog)
                    try writeValue(after, &w, catalog)
                case .membership(let property, let added, let removed):
                    w.varint(try code(property))
                    w.byte(ValueTag.membership.rawValue)
                    try writeReferences(added, &w, catalog)
                    try writeReferences(removed, &w, catalog)
                }
            }
        }
    }

    /// The start of an insert's or a delete's change: the operation and the object.
    /// ``writeCodedValues(_:_:_:)`` follows with its values.
    static func writeImageStart(insert: Bool, entityCode: UInt16, primaryKey: UInt64, _ w: inout ByteWriter) {
        w.byte(insert ? 1 : 3)
        w.varint(UInt64(entityCode))
        w.varint(primaryKey)
    }

    /// An object's values by property code, sorted by code: the count, then each code and
    /// value. Inserts, deletes and state records share this layout.
    static func writeCodedValues(_ values: [(code: Int, value: LogValue)], _ w: inout ByteWriter, _ catalog: some CodecCatalog) throws(LogError) {
        w.varint(values.count)
        for (code, value) in values {
            w.varint(code)
            try writeValue(value, &w, catalog)
        }
    }

    /// ``decode(_:catalog:context:)`` with the context a failure names built only when it
    /// fails: the bytes are decoded again under it, which throws the same error naming it. A
    /// scan of a million compacted events built a million such strings, 8% of its time.
    static func decode(
        _ bytes: UnsafeRawBufferPointer, catalog: some CodecCatalog, naming context: () -> String
    ) throws(LogError) -> TransactionEvent {
        do {
            return try decode(bytes, catalog: catalog, context: "")
        } catch {
            return try decode(bytes, catalog: catalog, context: context())
        }
    }

    /// Decodes an event, checking its magic, version and checksum first.
    static func decode(_ bytes: UnsafeRawBufferPointer, catalog: some CodecCatalog, context: String) throws(LogError)
        -> TransactionEvent
    {
        guard bytes.count >= 4 + 2 + 8 + 8 + 4 + 4 else {
            throw .malformed("\(context): \(bytes.count) bytes is too short for an event")
        }
        guard Array(bytes[0..<4]) == magic else { throw .malformed("\(context): not an event (bad magic)") }
        guard bytes[4] <= formatVersion else {
            throw .unsupportedFormatVersion(found: Int(bytes[4]), supported: Int(formatVersion), context: context)
        }
        guard bytes[4] >= 1 else { throw .malformed("\(context): format version 0, which no Strata writes") }
        let body = UnsafeRawBufferPointer(rebasing: bytes[0..<(bytes.count - 4)])
        let (stored, computed) = checksums(bytes)
        guard stored == computed else {
            throw .checksumMismatch(
                "\(context): stored 0x\(String(stored, radix: 16)), computed 0x\(String(computed, radix: 16))")
        }

        var r = ByteReader(body, context: context)
        _ = try r.rawBytes(5)
        let flags = try r.byte()
        guard flags & ~3 == 0 else { throw r.failure("event flags 0x\(String(flags, radix: 16)) set bits no Strata writes") }
        let sequence = try r.uint64()
        let micros = Int64(bitPattern: try r.uint64())
        // A commit refuses timestamps beyond ±9 × 10¹² s of 1970 (spec 0004 §6.3).
        guard micros.magnitude <= maximumTimestampMicroseconds else {
            throw r.failure("timestamp of \(micros) µs since 1970 is out of range")
        }
        let processID = Int32(bitPattern: try r.uint32())
        let author = flags & 1 != 0 ? try r.string() : nil
        let contextName = flags & 2 != 0 ? try r.string() : nil
        let kind: TransactionKind
        switch try r.byte() {
        case 0: kind = .save
        case 1: kind = .undo(of: try r.varint(), group: try r.count(limit: Int(Int32.max)))
        case 2: kind = .redo(of: try r.varint(), group: try r.count(limit: Int(Int32.max)))
        case 3: kind = .migration
        case 4: kind = .import
        case 5:
            let code = try r.varint()
            guard code <= UInt64(UInt16.max) else { throw r.failure("entity code \(code) out of range") }
            let entity = try catalog.entityName(UInt16(code))
            let first = try r.varint()
            let last = try r.varint()
            guard first >= 1, first <= last else { throw r.failure("reservation range \(first)…\(last) is empty") }
            kind = .reservation(entity: entity, range: first...last)
        case 6: kind = .purge(through: try r.varint())
        case let other: throw r.failure("unknown transaction kind \(other)")
        }
        let modelVersion = try r.count(limit: Int(Int32.max))
        let schema = try catalog.schema(forModelVersion: modelVersion)
        let groupCount = try r.count(limit: r.remaining)
        var groups: [ChangeGroup] = []
        groups.reserveCapacity(groupCount)
        // Bit 2 (not recorded for undo) exists from format version 2 on.
        let version = bytes[4]
        let groupFlagBits: UInt8 = version >= 2 ? 7 : 3
        for _ in 0..<groupCount {
            let flags = try r.byte()
            guard flags & ~groupFlagBits == 0 else { throw r.failure("bad group flags \(flags)") }
            let actionName: String? = flags & 1 != 0 ? try r.string() : nil
            var origin: GroupOrigin?
            if flags & 2 != 0 {
                switch try r.byte() {
                case 1: origin = .undo(of: try r.varint(), group: try r.count(limit: Int(Int32.max)))
                case 2: origin = .redo(of: try r.varint(), group: try r.count(limit: Int(Int32.max)))
                case let other: throw r.failure("unknown group origin \(other)")
                }
            }
            let changeCount = try r.count(limit: r.remaining)
            var changes: [Change] = []
            changes.reserveCapacity(changeCount)
            for _ in 0..<changeCount {
                changes.append(try readChange(&r, schema: schema, catalog: catalog))
            }
            groups.append(ChangeGroup(actionName: actionName, changes: changes, origin: origin, recordedForUndo: flags & 4 == 0))
        }
        guard r.isAtEnd else { throw r.failure("\(r.remaining) unexpected trailing bytes") }
        // Each event has one encoding: the oldest version that holds it.
        let holding = formatVersion(of: groups, schema: schema)
        guard version == holding else {
            throw r.failure("format version \(version) for groups that version \(holding) holds, which no Strata writes")
        }
        return TransactionEvent(
            sequence: sequence, timestamp: date(microseconds: micros), author: author, contextName: contextName,
            processID: processID, kind: kind, modelVersion: modelVersion, groups: groups)
    }

    /// The header of an event's bytes, without checking the checksum or decoding the rest;
    /// nil if the bytes don't start like an event this build reads.
    static func header(_ bytes: UnsafeRawBufferPointer) -> EventHeader? {
        guard bytes.count >= 4 + 2 + 8 + 8 + 4 + 4, bytes[0] == magic[0], bytes[1] == magic[1], bytes[2] == magic[2],
            bytes[3] == magic[3], bytes[4] <= formatVersion
        else { return nil }
        var r = ByteReader(UnsafeRawBufferPointer(rebasing: bytes[0..<(bytes.count - 4)]), context: "event header")
        do {
            _ = try r.rawBytes(5)
            let flags = try r.byte()
            let sequence = try r.uint64()
            let micros = Int64(bitPattern: try r.uint64())
            let processID = Int32(bitPattern: try r.uint32())
            let author = flags & 1 != 0 ? try r.string() : nil
            let contextName = flags & 2 != 0 ? try r.string() : nil
            return EventHeader(
                sequence: sequence, timestamp: date(microseconds: micros), author: author, contextName: contextName,
                processID: processID)
        } catch {
            return nil
        }
    }

    /// The model version an event's bytes name, read without decoding its groups (nil when
    /// the bytes don't read as an event; the checksum isn't checked).
    static func modelVersion(_ bytes: UnsafeRawBufferPointer) -> Int? {
        modelVersion(bytes, checkingChecksum: false)
    }

    /// ``modelVersion(_:)`` of bytes whose checksum is also checked: nil as well when it
    /// doesn't match (the caller decodes the event then, for the error that names it).
    static func checkedModelVersion(_ bytes: UnsafeRawBufferPointer) -> Int? {
        modelVersion(bytes, checkingChecksum: true)
    }

    /// An event's stored checksum (its last 4 bytes, big-endian) and the one computed over
    /// the bytes before it; the bytes are at least 4 long.
    private static func checksums(_ bytes: UnsafeRawBufferPointer) -> (stored: UInt32, computed: UInt32) {
        var stored: UInt32 = 0
        for i in (bytes.count - 4)..<bytes.count { stored = stored << 8 | UInt32(bytes[i]) }
        return (stored, CRC32C.checksum(UnsafeRawBufferPointer(rebasing: bytes[0..<(bytes.count - 4)])))
    }

    private static func modelVersion(_ bytes: UnsafeRawBufferPointer, checkingChecksum: Bool) -> Int? {
        guard header(bytes) != nil else { return nil }
        if checkingChecksum {
            let (stored, computed) = checksums(bytes)
            guard stored == computed else { return nil }
        }
        var r = ByteReader(UnsafeRawBufferPointer(rebasing: bytes[0..<(bytes.count - 4)]), context: "event header")
        do {
            _ = try r.rawBytes(5)
            let flags = try r.byte()
            _ = try r.rawBytes(8 + 8 + 4)
            if flags & 1 != 0 { _ = try r.string() }
            if flags & 2 != 0 { _ = try r.string() }
            switch try r.byte() {
            case 1, 2:
                _ = try r.varint()
                _ = try r.varint()
            case 5:
                _ = try r.varint()
                _ = try r.varint()
                _ = try r.varint()
            case 6: _ = try r.varint()
            default: break
            }
            return try r.count(limit: Int(Int32.max))
        } catch {
            return nil
        }
    }

    static func readChange(
        _ r: inout ByteReader, schema: ModelSchema, catalog: some CodecCatalog
    ) throws(LogError) -> Change {
        let op = try r.byte()
        let id = try readReference(&r, catalog)
        guard let entity = schema.entities[id.entity] else { throw r.failure("entity \(id.entity) is not in the event's model") }
        func name(_ code: Int) throws(LogError) -> String {
            guard code < entity.properties.count else { throw r.failure("property code \(code) out of range for \(id.entity)") }
            return entity.properties[code].name
        }
        switch op {
        case 1, 3:
            let n = try r.count(limit: r.remaining)
            var values: [String: LogValue] = [:]
            values.reserveCapacity(n)
            var previous = -1
            for _ in 0..<n {
                let code = try r.count(limit: Int(Int32.max))
                // Inserts and deletes list properties by ascending code, each once.
                guard code > previous else { throw r.failure("property code \(code) after \(previous): codes must ascend") }
                previous = code
                let property = try name(code)
                let value = try readValue(&r, catalog)
                // A delete's before-value of an attribute is what the record held, which
                // another model version may have written in its own type (§3.5).
                guard fits(value, entity.valueKinds[code]) || (op == 3 && isRecordedAttribute(value, entity.properties[code]))
                else { throw misfit(value, entity.properties[code], entity: id.entity, r) }
                values[property] = value
            }
            return op == 1 ? .insert(id, values: values) : .delete(id, before: values)
        case 2:
            let n = try r.count(limit: r.remaining)
            var changes: [PropertyChange] = []
            changes.reserveCapacity(n)
            for _ in 0..<n {
                let code = try r.count(limit: Int(Int32.max))
                let property = try name(code)
                let described = entity.properties[code]
                if r.remaining > 0, r.bytes[r.offset] == ValueTag.membership.rawValue {
                    guard described.relationship == .unorderedToMany else {
                        throw r.failure("a membership change of \(id.entity).\(property), which is not a recorded unordered to-many relationship")
                    }
                    _ = try r.byte()
                    let added = try readReferences(&r, catalog)
                    let removed = try readReferences(&r, catalog)
                    changes.append(.membership(property: property, added: added, removed: removed))
                } else {
                    let before = try readValue(&r, catalog)
                    // An update's before-value of an attribute is what the record held: of the
                    // type another model version stored — an earlier one's a migration converts
                    // (§4.4), a later one's an earlier app changes (§3.5).
                    guard fits(before, entity.valueKinds[code]) || isRecordedAttribute(before, described) else {
                        throw misfit(before, described, entity: id.entity, r)
                    }
                    let after = try readValue(&r, catalog)
                    guard fits(after, entity.valueKinds[code]) else { throw misfit(after, described, entity: id.entity, r) }
                    changes.append(.value(property: property, before: before, after: after))
                }
            }
            return .update(id, changes: changes)
        default:
            throw r.failure("unknown change operation \(op)")
        }
    }

    /// Whether `value` is an attribute value (of any type) and `property` an attribute: a
    /// before-value another model version's record may hold.
    private static func isRecordedAttribute(_ value: LogValue, _ property: ModelSchema.Property) -> Bool {
        guard property.isAttribute, case .attribute = value else { return false }
        return true
    }

    /// Microseconds since 1970, the timestamp's stored precision, or nil for a date that has
    /// none (NaN, infinite, or beyond about 285,000 years from 1970: `ISO8601.microseconds`).
    static func microseconds(_ date: Date) -> Int64? {
        ISO8601.microseconds(date)
    }

    /// Microseconds since 1970 of a clock reading (`Date()`), which always has them.
    static func microsecondsNow() -> Int64 {
        ISO8601.microseconds(Date()) ?? 0
    }

    static func date(microseconds: Int64) -> Date {
        Date(timeIntervalSince1970: Double(microseconds) / 1_000_000)
    }
}

extension Change {
    var isInsert: Bool {
        if case .insert = self { return true }
        return false
    }
}

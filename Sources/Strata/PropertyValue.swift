import Foundation
import StrataLog
import StrataModel

/// A property's value inside a context: an attribute value, a to-one destination, or
/// to-many destinations (in order for ordered relationships; sorted for unordered ones,
/// which compare as sets). `invalid` keeps a value of the wrong type that `setValue` was
/// given, so the save can refuse it with a clear error instead of crashing.
enum PropertyValue: Hashable, Sendable {
    case attribute(AttributeValue?)
    /// Boxed (`indirect`), so a value is 24 bytes, not 48: rows hold one per property.
    indirect case toOne(ManagedObjectID?)
    case toMany([ManagedObjectID])
    case invalid(String)

    static let none = PropertyValue.attribute(nil)
    /// An unset to-one, made once: `.toOne` is boxed, so making one allocates (and its
    /// going frees); the empty value of every to-one shares this box.
    static let noObject = PropertyValue.toOne(nil)

    /// Whether the value leaves a uniqueness constraint unchecked: nil, a floating-point NaN or
    /// a date at NaN (``LogValue/leavesUniquenessUnchecked``).
    var leavesUniquenessUnchecked: Bool {
        switch self {
        case .attribute(.double(let v)?): v.isNaN
        case .attribute(.float(let v)?): v.isNaN
        case .attribute(.date(let v)?): v.timeIntervalSinceReferenceDate.isNaN
        default: isNil
        }
    }

    var isNil: Bool {
        // Matched without binding the payloads: binding one copied it (a retain and a release).
        switch self {
        case .attribute(.none), .toOne(.none): true
        case .attribute(.some), .toOne(.some), .invalid: false
        case .toMany(let ids): ids.isEmpty
        }
    }

    /// Whether `a` and `b` differ — the test of whether a set is a change — telling a set
    /// value from an unset one (the usual case of a set on a new object) without the full
    /// comparison. Strings compare literally, as Core Data's `isEqual:` does
    /// (``same(_:_:)``).
    @inline(__always)
    static func differ(_ a: PropertyValue, _ b: PropertyValue) -> Bool {
        a.isNil != b.isNil || !same(a, b)
    }

    /// Whether `a` is `b` exactly: `==`, but attribute strings compared by their bytes
    /// (``AttributeValue/isIdentical(to:)``), so "é" decomposed and precomposed differ —
    /// setting one over the other is a change, saved and undoable (before, Swift's canonical
    /// `==` dropped it). Uniqueness clashes still group canonically equal strings (`==`).
    static func same(_ a: PropertyValue, _ b: PropertyValue) -> Bool {
        if case .attribute(let x?) = a, case .attribute(let y?) = b { return x.isIdentical(to: y) }
        return a == b
    }

    /// Whether the value names any object (a set to-one, a non-empty to-many).
    var holdsIDs: Bool {
        switch self {
        case .toOne(let id): id != nil
        case .toMany(let ids): !ids.isEmpty
        default: false
        }
    }

    /// Whether the value names an object by a temporary ID.
    var holdsTemporaryIDs: Bool {
        switch self {
        case .toOne(let id?): id.isTemporaryID
        case .toMany(let ids): ids.contains { $0.isTemporaryID }
        default: false
        }
    }

    var ids: [ManagedObjectID] {
        switch self {
        case .toOne(let id?): [id]
        case .toMany(let ids): ids
        default: []
        }
    }

    /// The value of relationship `property` relating the stored objects `ids` (as the log's
    /// `related` reads them): to-one, ordered or unordered to-many.
    static func related(_ ids: [StoredObjectID], for property: PropertyInfo, store: UUID) -> PropertyValue {
        let mapped = ids.map { ManagedObjectID.permanent($0, store: store) }
        return property.isToMany ? (property.isOrdered ? .toMany(mapped) : .unordered(mapped)) : .toOne(mapped.first)
    }

    static func unordered(_ ids: [ManagedObjectID]) -> PropertyValue {
        // Already sorted and unique (the common case after one insertion): keep as is.
        if zip(ids, ids.dropFirst()).allSatisfy({ $0 < $1 }) { return .toMany(ids) }
        return .toMany(Array(Set(ids)).sorted())
    }

    /// Where `id` is, or would go, in the sorted, unique `ids` (binary search).
    static func position(of id: ManagedObjectID, in ids: [ManagedObjectID]) -> (index: Int, found: Bool) {
        var low = 0
        var high = ids.count
        while low < high {
            let middle = (low + high) / 2
            if ids[middle] < id { low = middle + 1 } else { high = middle }
        }
        return (low, low < ids.count && ids[low] == id)
    }

    /// Adds `id` to or removes it from a to-many value's `ids` — in order, kept unique, for an
    /// unordered one (sorted: a binary search and one insertion or removal); appended or
    /// removed for an ordered one. Whether `ids` changed.
    ///
    /// `knownAbsent`: the caller knows `id` isn't in an ordered value it adds to (from the
    /// other side of the relationship), so it is appended without looking through the list —
    /// the look made filling a large ordered to-many quadratic.
    static func changeMembership(
        _ ids: inout [ManagedObjectID], _ id: ManagedObjectID, adding: Bool, ordered: Bool, knownAbsent: Bool = false
    ) -> Bool {
        if ordered {
            if adding {
                guard knownAbsent || !ids.contains(id) else { return false }
                ids.append(id)
            } else {
                guard let index = ids.firstIndex(of: id) else { return false }
                ids.remove(at: index)
            }
            return true
        }
        // Added after every member (IDs made in order, as a context's temporary IDs are):
        // one comparison, not a binary search.
        if adding, let last = ids.last, last < id {
            ids.append(id)
            return true
        }
        let (index, found) = position(of: id, in: ids)
        if adding {
            guard !found else { return false }
            ids.insert(id, at: index)
        } else if found {
            ids.remove(at: index)
        } else {
            // Not where the order puts it: look everywhere before saying it isn't there.
            guard let index = ids.firstIndex(of: id) else { return false }
            ids.remove(at: index)
        }
        return true
    }

    /// Runs `body` on a to-many value's IDs in place: the array isn't copied when this value
    /// is its only holder. nil (and `body` not run) for any other value.
    mutating func updateIDs<Result>(_ body: (inout [ManagedObjectID]) -> Result) -> Result? {
        guard case .toMany(var ids) = self else { return nil }
        self = .none
        defer { self = .toMany(ids) }
        return body(&ids)
    }

    /// Renders for messages.
    var text: String {
        switch self {
        case .attribute(nil), .toOne(nil): "nil"
        case .attribute(let v?): LogValue.attribute(v).description
        case .toOne(let id?): id.description
        case .toMany(let ids): "[" + ids.map(\.description).joined(separator: ", ") + "]"
        case .invalid(let what): what
        }
    }
}

/// How a property is stored, resolved once per entity.
/// A property's facts, shared by reference: looking one up copies no strings.
final class PropertyInfo: Sendable {
    enum Kind: Sendable, Equatable {
        case attribute(AttributeType)
        case toOne
        case toMany(ordered: Bool)
    }
    let name: String
    let kind: Kind
    let isTransient: Bool
    let isOptional: Bool
    let defaultValue: AttributeValue?
    let destination: String?
    let inverse: String?
    let deleteRule: DeleteRule
    /// Whether the log records this side (false for derived sides and transient properties).
    let isRecorded: Bool
    /// A derived attribute's derivation (spec 0006 §24): the store computes its value at
    /// save; the context never sets it or writes it to a draft.
    let derivation: String?
    /// Whether the property is a derived attribute.
    var isDerived: Bool { derivation != nil }
    /// Whether a save writes the context's changes of the property to the store: a
    /// recorded property that isn't a derived attribute.
    let isWritten: Bool
    /// The property's position in its entity's ``EntityInfo/orderedNames``: where a
    /// ``PropertyRow`` holds its value.
    let slot: Int

    init(
        name: String, kind: Kind, isTransient: Bool, isOptional: Bool, defaultValue: AttributeValue?, destination: String?,
        inverse: String?, deleteRule: DeleteRule, isRecorded: Bool, slot: Int = 0, derivation: String? = nil
    ) {
        self.slot = slot
        self.derivation = derivation
        isWritten = isRecorded && derivation == nil
        self.name = name
        self.kind = kind
        self.isTransient = isTransient
        self.isOptional = isOptional
        self.defaultValue = defaultValue
        self.destination = destination
        self.inverse = inverse
        self.deleteRule = deleteRule
        self.isRecorded = isRecorded
    }

    var isRelationship: Bool { if case .attribute = kind { false } else { true } }
    var isToMany: Bool { if case .toMany = kind { true } else { false } }
    var isOrdered: Bool { if case .toMany(true) = kind { true } else { false } }

    /// The value of the property when unset.
    var emptyValue: PropertyValue {
        switch kind {
        case .attribute: .attribute(nil)
        case .toOne: PropertyValue.noObject
        case .toMany: .toMany([])
        }
    }
}

/// Per-entity property tables, built once per model.
final class EntityInfo: Sendable {
    let entity: EntityDescription
    let properties: [String: PropertyInfo]
    let orderedNames: [String]
    /// The properties in slot order (``orderedNames``' order).
    let propertyList: [PropertyInfo]
    /// Every attribute with its property, in the entity's order (what validation walks).
    let attributes: [(description: AttributeDescription, property: PropertyInfo)]
    /// For each of ``attributes``: its type, and whether a value of that type can fail any
    /// rule besides being required (range, length, pattern, validation predicates). Saving
    /// skips the full check of a present value when it can't.
    let attributeChecks: [(property: PropertyInfo, type: AttributeType, hasRules: Bool)]
    /// For each of ``relationships``: its property, and what its count must satisfy
    /// (``RelationshipDescription/validate(count:entity:localization:)``'s rules), so
    /// saving checks a count without reaching the description.
    let relationshipChecks: [(property: PropertyInfo, isOptional: Bool, minimum: Int?, maximum: Int?)]
    /// Every relationship with its property, in the entity's order.
    let relationships: [(description: RelationshipDescription, property: PropertyInfo)]
    /// Whether the entity is abstract (no objects of its own).
    let isAbstract: Bool
    /// The entity's name, then its ancestors' nearest first: where the coordinator looks
    /// for the class of its objects.
    let classLookupNames: [String]
    /// The properties with a default value, in slot order (what an insert sets).
    let defaultedProperties: [PropertyInfo]
    /// The relationships' properties: the only ones whose values name objects.
    let relationshipProperties: [PropertyInfo]
    /// An empty table of pending changes with room for every property: what an inserted
    /// object starts with. Its first change copies the empty table (the object gets its own),
    /// which costs less than making one: `Dictionary(minimumCapacity:)` runs in the standard
    /// library unspecialized and looks the storage's generic type up on every call.
    let emptyChanges: [String: PropertyValue]

    init(entity: EntityDescription, model: ManagedObjectModel) {
        self.entity = entity
        var names: [String] = entity.allAttributes.map(\.name)
        names += entity.allRelationships.map(\.name)
        let orderedNames = Array(Set(names)).sorted()
        var slots: [String: Int] = [:]
        for (slot, name) in orderedNames.enumerated() { slots[name] = slot }
        var properties: [String: PropertyInfo] = [:]
        for attribute in entity.allAttributes {
            properties[attribute.name] = PropertyInfo(
                name: attribute.name, kind: .attribute(attribute.attributeType), isTransient: attribute.isTransient,
                isOptional: attribute.isOptional, defaultValue: attribute.defaultValue, destination: nil, inverse: nil,
                deleteRule: .nullify, isRecorded: !attribute.isTransient, slot: slots[attribute.name] ?? 0,
                derivation: attribute.derivationExpression?.format)
        }
        for relationship in entity.allRelationships {
            let recorded = RecordedSide.isRecorded(relationship, of: entity, in: model)
            properties[relationship.name] = PropertyInfo(
                name: relationship.name,
                kind: relationship.isToMany ? .toMany(ordered: relationship.isOrdered) : .toOne,
                isTransient: relationship.isTransient, isOptional: relationship.isOptional, defaultValue: nil,
                destination: relationship.destinationEntityName, inverse: relationship.inverseName,
                deleteRule: relationship.deleteRule, isRecorded: recorded, slot: slots[relationship.name] ?? 0)
        }
        self.properties = properties
        self.orderedNames = orderedNames
        propertyList = orderedNames.compactMap { properties[$0] }
        defaultedProperties = propertyList.filter { $0.defaultValue != nil }
        isAbstract = entity.isAbstract
        classLookupNames = [entity.name] + entity.superentityNames
        lookup = NameLookup(propertyList.map(\.name))
        transientSlots = ContiguousArray(propertyList.map(\.isTransient))
        // Derived attributes aren't validated: the store computes their values after validation.
        attributes = entity.allAttributes.filter { !$0.isDerived }.compactMap { attribute in properties[attribute.name].map { (attribute, $0) } }
        attributeChecks = attributes.map { attribute, property in
            let rules = attribute.minimumValue != nil || attribute.maximumValue != nil || attribute.minimumLength != nil
                || attribute.maximumLength != nil || attribute.regularExpression != nil || !attribute.validationPredicates.isEmpty
            return (property, attribute.attributeType, rules)
        }
        relationships = entity.allRelationships.compactMap { relationship in properties[relationship.name].map { (relationship, $0) } }
        relationshipChecks = relationships.map { relationship, property in
            (property, relationship.isOptional, relationship.minCount, relationship.isToMany ? relationship.maxCount : 1)
        }
        relationshipProperties = relationships.map(\.property)
        emptyChanges = Dictionary(minimumCapacity: propertyList.count)
        var checkBySlot = [Int](repeating: Int.min, count: propertyList.count)
        for (index, check) in attributeChecks.enumerated() { checkBySlot[check.property.slot] = index }
        for (index, check) in relationshipChecks.enumerated() { checkBySlot[check.property.slot] = -1 - index }
        self.checkBySlot = checkBySlot
        requiredRelationshipCount = relationshipChecks.count { !$0.isOptional }
        hasDerivedAttributes = propertyList.contains { $0.isDerived }
        checksOnlyPersistent = !attributeChecks.contains { $0.property.isTransient }
            && !relationshipChecks.contains { $0.property.isTransient }
    }

    /// For each slot, where its property's check is: `i` ≥ 0 in ``attributeChecks``,
    /// `-1 - i` in ``relationshipChecks``; `Int.min` for none. Lets a save check an inserted
    /// object's values in one walk over its changes (``ContextCore/passesTrivially(_:_:)``).
    let checkBySlot: [Int]
    /// How many of ``relationshipChecks`` are not optional (an empty value fails them).
    let requiredRelationshipCount: Int
    /// Whether no checked property is transient (a transient's value isn't in the changes).
    let checksOnlyPersistent: Bool
    /// Whether the entity has derived attributes (spec 0006 §24).
    let hasDerivedAttributes: Bool

    /// The properties' slots by name: ``slot(named:)`` compares a key with the one or two
    /// names of its length instead of hashing it, and retains no property.
    private let lookup: NameLookup
    /// Whether the property in each slot is transient.
    let transientSlots: ContiguousArray<Bool>

    /// The slot of the property named `key` (``PropertyInfo/slot``), or nil.
    @inline(__always)
    func slot(named key: String) -> Int? {
        // `lookup.position(of:)`, written out here: every property read by name comes this
        // way, and the call into StrataLog isn't inlined (≈ 70 instructions an object in C2).
        let length = key.utf8.count
        let starts = lookup.lengthStarts
        guard length + 1 < starts.count else { return nil }
        let end = starts[length + 1]
        var index = starts[length]
        while index < end {
            if lookup.names[index] == key { return lookup.positions[index] }
            index += 1
        }
        return nil
    }

    /// Whether the entity is the entity named `name` or one of its sub-entities
    /// (`entity.isKindOf(entityNamed:)`, without copying the description).
    func isKind(ofEntityNamed name: String) -> Bool {
        classLookupNames.contains(name)
    }

    /// The property named `key` (what `properties[key]` gives, without hashing the key).
    func property(named key: String) -> PropertyInfo? {
        slot(named: key).map { propertyList[$0] }
    }
}

/// One object's persistent values by slot (``PropertyInfo/slot``): a fetched row or the
/// committed values it became, read without hashing property names. Holds what a
/// `[String: PropertyValue]` of the same values holds; nil slots are absent keys.
struct PropertyRow {
    let info: EntityInfo
    var values: RowSlots

    init(info: EntityInfo) {
        self.info = info
        values = RowSlots(count: info.propertyList.count)
    }

    init(info: EntityInfo, _ dictionary: [String: PropertyValue]) {
        self.init(info: info)
        for (name, value) in dictionary { if let slot = info.properties[name]?.slot { values[slot] = value } }
    }

    /// The value of `property`. A property of another entity's table (a parent's or a
    /// sub-entity's, where slots differ) is found by name.
    subscript(property: PropertyInfo) -> PropertyValue? {
        get { slot(of: property).flatMap { values[$0] } }
        set { if let slot = slot(of: property) { values[slot] = newValue } }
    }

    /// Where `property` is held: its slot when it is this row's entity's own description,
    /// otherwise the slot of this entity's property of the same name.
    func slot(of property: PropertyInfo) -> Int? {
        let slot = property.slot
        if slot < info.propertyList.count, info.propertyList[slot] === property { return slot }
        return info.properties[property.name]?.slot
    }

    /// The set attribute value in `slot`, when this is a row of `entity`'s own table and the
    /// slot holds one (nil for a relationship, a nil value or an absent one).
    @inline(__always)
    func attribute(at slot: Int, of entity: EntityInfo) -> AttributeValue? {
        guard info === entity, case .attribute(let value)? = values[slot] else { return nil }
        return value
    }

    /// The values by name.
    var dictionary: [String: PropertyValue] {
        // Sized at creation: `init(minimumCapacity:)` is specialized here, `reserveCapacity` isn't.
        var result = [String: PropertyValue](minimumCapacity: values.count)
        for (property, slot) in zip(info.propertyList, 0..<values.count) { if let value = values[slot] { result[property.name] = value } }
        return result
    }
}

/// A row's values by slot, with value semantics (copied on write), like a
/// `ContiguousArray<PropertyValue?>` of fixed length. Its storage is a non-generic class,
/// so making a row costs one allocation and no generic metadata lookup (an array of
/// `PropertyValue?` looks its storage type up at run time on every allocation), and
/// freeing one destroys its values without the runtime's generic array destruction.
struct RowSlots {
    private var storage: RowSlotStorage
    /// The first slot of ``storage``, kept so that a read is a plain load. Reaching the
    /// slots through `ManagedBuffer`'s closures pins the storage (`_fixLifetime`), and a
    /// row held by an object was then copied (a retain and a release) on every read.
    private var base: UnsafeMutablePointer<PropertyValue?>

    /// `count` empty (nil) slots.
    init(count: Int) {
        storage = RowSlotStorage.make(count: count)
        base = storage.slots
    }

    /// The number of slots: the storage's header, read through ``base`` (it sits right
    /// before the first slot, ``RowSlotStorage/make(count:)`` checks), without the
    /// exclusivity check reading `storage.header` makes on every read of a slot.
    var count: Int {
        @inline(__always) get { UnsafeRawPointer(base).load(fromByteOffset: -MemoryLayout<Int>.stride, as: Int.self) }
    }

    subscript(slot: Int) -> PropertyValue? {
        @inline(__always) get {
            precondition(slot >= 0 && slot < count, "slot out of range")
            return base[slot]
        }
        set {
            precondition(slot >= 0 && slot < count, "slot out of range")
            makeUnique()
            base[slot] = newValue
        }
    }

    /// Calls `body` with the slots to change in place.
    mutating func withUnsafeMutableBufferPointer<R>(_ body: (inout UnsafeMutableBufferPointer<PropertyValue?>) throws -> R) rethrows -> R {
        makeUnique()
        var buffer = UnsafeMutableBufferPointer(start: base, count: count)
        return try withExtendedLifetime(storage) { try body(&buffer) }
    }

    private mutating func makeUnique() {
        guard !isKnownUniquelyReferenced(&storage) else { return }
        let copy = RowSlotStorage.make(count: count)
        copy.slots.initialize(from: base, count: count)
        storage = copy
        base = copy.slots
    }
}

/// ``RowSlots``' storage: the slot count (the header), then the slots.
final class RowSlotStorage: ManagedBuffer<Int, PropertyValue?> {
    /// Storage of `count` nil slots.
    static func make(count: Int) -> RowSlotStorage {
        let buffer = unsafeDowncast(RowSlotStorage.create(minimumCapacity: count) { _ in count }, to: RowSlotStorage.self)
        let slots = buffer.slots
        // `RowSlots.count` reads the header as the word before the first slot.
        precondition(
            buffer.withUnsafeMutablePointerToHeader { UnsafeMutableRawPointer($0) + MemoryLayout<Int>.stride } == UnsafeMutableRawPointer(slots),
            "row slots don't follow their count")
        slots.initialize(repeating: nil, count: count)
        return buffer
    }

    /// The first slot; valid while the storage is alive.
    var slots: UnsafeMutablePointer<PropertyValue?> { withUnsafeMutablePointerToElements { $0 } }

    deinit {
        // One slot at a time: destroying them as one range goes through the runtime's
        // generic array destruction.
        // Slots holding nothing to release (nil, or a number, a Boolean or a date) are
        // skipped, without a call to the value's destroy witness.
        let slots = self.slots
        for slot in 0..<withUnsafeMutablePointerToHeader({ $0.pointee }) {
            switch slots[slot] {
            case nil, .attribute(nil)?, .attribute(.int16?)?, .attribute(.int32?)?, .attribute(.int64?)?,
                .attribute(.double?)?, .attribute(.float?)?, .attribute(.boolean?)?, .attribute(.date?)?:
                continue
            case .attribute(.string?)?:
                // Moved out and released as the string it is (the generic destroy of an
                // optional property value goes through three value-witness calls).
                if case .attribute(.string(let string)?)? = (slots + slot).move() { _ = consume string }
            default:
                // Moved out and destroyed as the concrete optional property value it is:
                // `deinitialize(count:)` went through `Optional`'s generic destroy witness,
                // looking the type's metadata up each time (a to-one in every person's row).
                _ = (slots + slot).move()
            }
        }
    }
}

extension Dictionary where Key == String, Value == PropertyValue {
    /// Passes the IDs of `relationships`' values through `fix` in place (only relationship
    /// values name objects; the others aren't looked at), each changed value then given to
    /// `normalize` with its key. With `onlyTemporary`, values naming no temporary ID are left.
    mutating func remapRelationshipIDs(
        _ relationships: [PropertyInfo], onlyTemporary: Bool,
        _ fix: (PropertyValue) -> PropertyValue, normalize: (String, PropertyValue) -> PropertyValue
    ) {
        for relationship in relationships {
            guard let index = index(forKey: relationship.name) else { continue }
            let value = values[index]
            guard onlyTemporary ? value.holdsTemporaryIDs : value.holdsIDs else { continue }
            values[index] = normalize(relationship.name, fix(value))
        }
    }

    /// The values with every ID passed through `fix`, each value then given to `normalize`
    /// with its key; the dictionary itself (no copy) when no value names an object.
    func remappingIDs(
        _ fix: (PropertyValue) -> PropertyValue, normalize: (String, PropertyValue) -> PropertyValue
    ) -> [String: PropertyValue] {
        guard contains(where: { $0.value.holdsIDs }) else { return self }
        var result = [String: PropertyValue](minimumCapacity: count)
        for (key, value) in self { result[key] = value.holdsIDs ? normalize(key, fix(value)) : value }
        return result
    }
}

extension AttributeValue {
    /// ``AttributeValue/anyValue`` built as an `Any` in one step. Converting `anyValue`'s
    /// `any Sendable` to the `Any` that key-value coding returns copies the value into a
    /// new existential and destroys the first one; every `value(forKey:)` of an attribute
    /// paid that.
    @inline(__always)
    var boxed: Any {
        switch self {
        case .int16(let v): v
        case .int32(let v): v
        case .int64(let v): v
        case .decimal(let v): v
        case .double(let v): v
        case .float(let v): v
        case .string(let v): v
        case .boolean(let v): v
        case .date(let v): v
        case .binaryData(let v): v
        case .uuid(let v): v
        case .uri(let v): v
        case .transformable(let v): v
        }
    }
}

public import StrataModel

// MARK: - SeedModels

/// The object models of the source documents in `shared/seeds/`, built with the model
/// builder, for every test suite and benchmark to reuse.
///
/// Each has a model file twin under `Specs/0002-model-file/` that the model tests load and
/// compare with these builders.
///
/// ```swift
/// let model = try SeedModels.leagueManager
/// model.entity(named: "Team")?.relationshipsByName["players"]?.deleteRule  // .cascade
/// ```
public enum SeedModels {
    // MARK: - Seed 001

    /// Seed 001's programmatic model: `Run` with a mandatory `date` (set in
    /// `awakeFromInsert`) and `processID` (default -1, validation `SELF > 0` with the warning
    /// "Process ID < 1"), plus the seed's localization dictionary.
    ///
    /// Eleven lines here against the seed's sixty lines of Objective-C.
    ///
    /// ```swift
    /// try SeedModels.run.validateValue(.int32(-1), forKey: "processID", in: "Run")
    /// ```
    public static var run: ManagedObjectModel {
        get throws {
            try ManagedObjectModel {
                Entity("Run") {
                    Attribute("date", .date).required().providedAtInsert()
                    Attribute("processID", .int32, default: -1).required()
                        .validated(by: "SELF > 0", warning: "Process ID < 1")
                }
                Localization([
                    "Property/date/Entity/Run": "Date",
                    "Property/processID/Entity/Run": "Process ID",
                    "ErrorString/Process ID < 1": "Process ID must not be less than 1",
                ])
            }
        }
    }

    /// Seed 001's class register: `StudentEntity` and `ClassEntity`, each with a mandatory
    /// `name` and the seed's default, a `students`/`inClass` to-many/to-one pair, and the
    /// one-way `monitor` (the class's monitor, cleared when that student leaves).
    ///
    /// ```swift
    /// try SeedModels.studentClass.inverseRelationship(of: "students", in: "ClassEntity")?.name  // "inClass"
    /// ```
    public static var studentClass: ManagedObjectModel {
        get throws {
            try ManagedObjectModel {
                Entity("StudentEntity") {
                    Attribute("name", .string, default: "学生甲").required()
                    Relationship("inClass", to: "ClassEntity", inverse: "students")
                }
                Entity("ClassEntity") {
                    Attribute("name", .string, default: "XX班").required()
                    Relationship("students", to: "StudentEntity", inverse: "inClass", toMany: true)
                    Relationship("monitor", to: "StudentEntity")
                }
            }
        }
    }

    // MARK: - Seed 004

    /// Seed 004's "League Manager": `Team` (name, uniform colour) with to-many `players`
    /// (cascade delete) and `Player` (first and last name, email) with the inverse `team`.
    ///
    /// ```swift
    /// try SeedModels.leagueManager.entity(named: "Player")?.relationshipsByName["team"]?.inverseName  // "players"
    /// ```
    public static var leagueManager: ManagedObjectModel {
        get throws {
            try ManagedObjectModel {
                Entity("Team") {
                    Attribute("name", .string)
                    Attribute("uniformColor", .string)
                    Relationship("players", to: "Player", inverse: "team", toMany: true, deleteRule: .cascade)
                }
                Entity("Player") {
                    Attribute("firstName", .string)
                    Attribute("lastName", .string)
                    Attribute("email", .string)
                    Relationship("team", to: "Team", inverse: "players")
                }
            }
        }
    }

    // MARK: - Seed 000

    /// Seed 000's employees: `Employee` (names, a non-negative `salary`, the transient cached
    /// `fullName` of the "Sarit Smith" refresh example, a mandatory `department`, and the
    /// `manager`/`directReports` pair used by `manager.manager.department.name`) and
    /// `Department` (name, `employees`; deleting a department with employees is denied).
    ///
    /// ```swift
    /// try SeedModels.employeeDepartment.entity(named: "Employee")?.attributesByName["fullName"]?.isTransient  // true
    /// ```
    public static var employeeDepartment: ManagedObjectModel {
        get throws {
            try ManagedObjectModel {
                Entity("Employee") {
                    Attribute("firstName", .string)
                    Attribute("lastName", .string)
                    Attribute("salary", .decimal, default: 0).required().range(min: 0)
                    Attribute("fullName", .string).transient()
                    Relationship("department", to: "Department", inverse: "employees").required()
                    Relationship("manager", to: "Employee", inverse: "directReports")
                    Relationship("directReports", to: "Employee", inverse: "manager", toMany: true)
                }
                Entity("Department") {
                    Attribute("name", .string)
                    Relationship("employees", to: "Employee", inverse: "department", toMany: true, deleteRule: .deny)
                }
            }
        }
    }

    // MARK: - Seed 003

    /// Seed 003's `Person` (first name, last name, age) and the seed's fetch — people aged
    /// between two bounds — as the template `peopleInAgeRange` with `$MIN` and `$MAX`.
    ///
    /// ```swift
    /// try SeedModels.person.fetchRequestTemplate(named: "peopleInAgeRange", substitutionVariables: ["MIN": 100, "MAX": 200])
    /// ```
    public static var person: ManagedObjectModel {
        get throws {
            try ManagedObjectModel {
                Entity("Person") {
                    Attribute("firstName", .string)
                    Attribute("lastName", .string)
                    Attribute("age", .int32, default: 0).required()
                }
                FetchRequestTemplate("peopleInAgeRange", entity: "Person", predicate: "age >= $MIN AND age <= $MAX")
            }
        }
    }

    // MARK: - Benchmarks and log tests

    /// A wider `Person` for benchmarks and event-log tests: names, a unique indexed
    /// `email`, an indexed `age`, a `score`, and a to-one `team` whose inverse is `Team.members`.
    ///
    /// ```swift
    /// try SeedModels.people.entity(named: "Person")?.uniquenessConstraints  // [["email"]]
    /// ```
    public static var people: ManagedObjectModel {
        get throws {
            try ManagedObjectModel {
                Entity("Person") {
                    Attribute("firstName", .string)
                    Attribute("lastName", .string)
                    Attribute("email", .string).indexed()
                    Attribute("age", .int32).indexed()
                    Attribute("score", .double)
                    Relationship("team", to: "Team", inverse: "members")
                    Unique("email")
                }
                Entity("Team") {
                    Attribute("name", .string)
                    Relationship("members", to: "Person", inverse: "team", toMany: true)
                }
            }
        }
    }

    // MARK: - Derived attributes

    /// Derived attributes of every kind (`Specs/0002-model-file/derived-attributes.json`):
    /// a `Department`'s employee count (indexed), salary sum, average, minimum and maximum,
    /// its `canonical(name)` and the time of its last save (`now()`); an `Employee`'s
    /// `department.name`, `uppercase(name)`, and `department.searchName` — a derivation
    /// reading another derived attribute.
    ///
    /// ```swift
    /// try SeedModels.derivedAttributes.entity(named: "Department")?.attributesByName["employeeCount"]?.isDerived  // true
    /// ```
    public static var derivedAttributes: ManagedObjectModel {
        get throws {
            try ManagedObjectModel {
                Entity("Department") {
                    Attribute("name", .string)
                    Attribute("employeeCount", .int64).derived(from: "employees.@count").indexed()
                    Attribute("totalSalary", .decimal).derived(from: "employees.@sum.salary")
                    Attribute("averageSalary", .decimal).derived(from: "employees.@avg.salary")
                    Attribute("lowestSalary", .decimal).derived(from: "employees.@min.salary")
                    Attribute("highestSalary", .decimal).derived(from: "employees.@max.salary")
                    Attribute("searchName", .string).derived(from: "canonical(name)").indexed()
                    Attribute("lastSaved", .date).derived(from: "now()")
                    Relationship("employees", to: "Employee", inverse: "department", toMany: true)
                }
                Entity("Employee") {
                    Attribute("name", .string)
                    Attribute("salary", .decimal)
                    Attribute("departmentName", .string).derived(from: "department.name")
                    Attribute("shoutedName", .string).derived(from: "uppercase(name)")
                    Attribute("departmentSearchName", .string).derived(from: "department.searchName")
                    Relationship("department", to: "Department", inverse: "employees")
                }
            }
        }
    }

    /// Every seed model by the name of its model file under `Specs/0002-model-file/`.
    ///
    /// ```swift
    /// for (file, model) in try SeedModels.all { … }
    /// ```
    public static var all: [(file: String, model: ManagedObjectModel)] {
        get throws {
            [
                ("run.json", try run), ("student-class.json", try studentClass), ("league-manager.json", try leagueManager),
                ("employee-department.json", try employeeDepartment), ("person.json", try person), ("people.json", try people),
                ("derived-attributes.json", try derivedAttributes),
            ]
        }
    }

    // MARK: - Query planner tests

    /// The query planner's test model: `Item` with an index on an attribute of every
    /// orderable type (`name`, `rank` int16, `count` int64, `score` double, `weight` float,
    /// `price` decimal, `flag`, `day` date), a unique `code` (a one-attribute uniqueness
    /// constraint, so an index too), an unindexed `note`, and a to-one `group`; the
    /// sub-entity `Gadget` (indexed `volts`) and its sub-entity `Gizmo` share Item's indexes.
    ///
    /// ```swift
    /// try SeedModels.catalog.entity(named: "Gizmo")?.superentityNames  // ["Gadget", "Item"]
    /// ```
    public static var catalog: ManagedObjectModel {
        get throws {
            try ManagedObjectModel {
                Entity("Item") {
                    Attribute("name", .string).indexed()
                    Attribute("code", .string)
                    Attribute("rank", .int16).indexed()
                    Attribute("count", .int64).indexed()
                    Attribute("score", .double).indexed()
                    Attribute("weight", .float).indexed()
                    Attribute("price", .decimal).indexed()
                    Attribute("flag", .boolean).indexed()
                    Attribute("day", .date).indexed()
                    Attribute("note", .string)
                    Relationship("group", to: "Group", inverse: "items")
                    Unique("code")
                }
                Entity("Gadget", parent: "Item") {
                    Attribute("volts", .int32).indexed()
                }
                Entity("Gizmo", parent: "Gadget")
                Entity("Group") {
                    Attribute("title", .string)
                    Relationship("items", to: "Item", inverse: "group", toMany: true)
                }
            }
        }
    }

    /// ``catalog``'s entities and values with compound indexes in place of most single
    /// ones: `name` and `count` keep an index of their own; `byFlagRank` (flag, rank),
    /// `byNoteName` (note, name — `note` has no other index), `byDayScore` (day, score),
    /// `byCountPriceWeight` (count, price, weight), `byGroupDay` (group, day — a to-one
    /// relationship first) and the uniqueness constraint on `code`; `Gadget` adds
    /// `byVoltsRank` (volts, rank), which `Gizmo` inherits.
    ///
    /// ```swift
    /// try SeedModels.compoundCatalog.entity(named: "Item")?.indexes.map(\.name)
    /// ```
    public static var compoundCatalog: ManagedObjectModel {
        get throws {
            try ManagedObjectModel {
                Entity("Item") {
                    Attribute("name", .string).indexed()
                    Attribute("code", .string)
                    Attribute("rank", .int16)
                    Attribute("count", .int64).indexed()
                    Attribute("score", .double)
                    Attribute("weight", .float)
                    Attribute("price", .decimal)
                    Attribute("flag", .boolean)
                    Attribute("day", .date)
                    Attribute("note", .string)
                    Relationship("group", to: "Group", inverse: "items")
                    Unique("code")
                    FetchIndex("byFlagRank", "flag", "rank")
                    FetchIndex("byNoteName", "note", "name")
                    FetchIndex("byDayScore", elements: [.init(propertyName: "day"), .init(propertyName: "score", isAscending: false)])
                    FetchIndex("byCountPriceWeight", "count", "price", "weight")
                    FetchIndex("byGroupDay", "group", "day")
                }
                Entity("Gadget", parent: "Item") {
                    Attribute("volts", .int32)
                    FetchIndex("byVoltsRank", "volts", "rank")
                }
                Entity("Gizmo", parent: "Gadget")
                Entity("Group") {
                    Attribute("title", .string)
                    Relationship("items", to: "Item", inverse: "group", toMany: true)
                }
            }
        }
    }
}

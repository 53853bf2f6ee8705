"""Vocabulary of the generated projects: domains, their entities and fields, project names.

Entities are written ``singular|plural|label field|number field:type|extra:type,...``;
the label field is a text column (names, titles), the number field is what
business logic adds to and subtracts from.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

DOMAINS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    # domain: (project name stems, entity specs)
    "inventory": (
        ("stockroom", "shelfwise", "inventra", "stockpile"),
        (
            "product|products|name|quantity:int|sku:str,price:float",
            "supplier|suppliers|company|rating:int|email:str,phone:str",
            "warehouse|warehouses|code|capacity:int|city:str",
            "purchase_order|purchase_orders|reference|total:float|status:str,supplier_id:int",
            "category|categories|title|position:int|slug:str",
            "shipment|shipments|tracking_code|weight:float|carrier:str,status:str",
            "stock_movement|stock_movements|reason|delta:int|product_id:int",
            "bin_location|bin_locations|label|slots:int|aisle:str",
        ),
    ),
    "billing": (
        ("ledgerly", "invoicer", "paydesk", "tallyhub"),
        (
            "invoice|invoices|number|amount:float|currency:str,status:str",
            "customer|customers|name|credit:float|email:str,country:str",
            "payment|payments|reference|amount:float|method:str,invoice_id:int",
            "subscription|subscriptions|plan_code|seats:int|status:str",
            "plan|plans|name|monthly_price:float|interval:str",
            "refund|refunds|reason|amount:float|payment_id:int",
            "coupon|coupons|code|percent_off:int|expires_on:str",
            "credit_note|credit_notes|number|amount:float|invoice_id:int",
        ),
    ),
    "blog": (
        ("inkwell", "quillpress", "storyline", "pagecraft"),
        (
            "post|posts|title|views:int|slug:str,body:str",
            "author|authors|display_name|post_count:int|email:str,bio:str",
            "comment|comments|body|likes:int|post_id:int,author_name:str",
            "tag|tags|name|usage_count:int|color:str",
            "page|pages|title|sort_order:int|slug:str",
            "media_asset|media_assets|filename|size_bytes:int|mime_type:str",
            "newsletter|newsletters|subject|recipients:int|status:str",
        ),
    ),
    "clinic": (
        ("carepoint", "medidesk", "clinicflow", "healthbay"),
        (
            "patient|patients|full_name|age:int|email:str,phone:str",
            "appointment|appointments|reason|duration_minutes:int|patient_id:int,starts_at:str",
            "doctor|doctors|name|max_daily_visits:int|specialty:str",
            "prescription|prescriptions|drug_name|refills:int|patient_id:int,dosage:str",
            "lab_result|lab_results|test_name|value:float|patient_id:int,unit:str",
            "room|rooms|code|beds:int|floor:str",
            "insurance_claim|insurance_claims|claim_number|amount:float|status:str",
        ),
    ),
    "fleet": (
        ("fleetline", "roadmaster", "dispatchly", "motorpool"),
        (
            "vehicle|vehicles|plate|mileage:int|model:str,status:str",
            "driver|drivers|name|license_points:int|license_number:str",
            "trip|trips|destination|distance_km:float|vehicle_id:int,driver_id:int",
            "fuel_log|fuel_logs|station|litres:float|vehicle_id:int",
            "maintenance_job|maintenance_jobs|description|cost:float|vehicle_id:int,status:str",
            "depot|depots|name|capacity:int|city:str",
            "inspection|inspections|inspector|score:int|vehicle_id:int",
        ),
    ),
    "library": (
        ("bookworm", "shelfmark", "libris", "readingroom"),
        (
            "book|books|title|copies:int|isbn:str,author:str",
            "member|members|name|borrow_limit:int|email:str,card_number:str",
            "loan|loans|due_date|renewals:int|book_id:int,member_id:int",
            "reservation|reservations|status|queue_position:int|book_id:int",
            "branch|branches|name|opening_hour:int|address:str",
            "fine|fines|reason|amount:float|member_id:int",
            "publisher|publishers|name|founded:int|country:str",
        ),
    ),
    "hr": (
        ("peoplehub", "staffline", "hirewise", "teamroster"),
        (
            "employee|employees|full_name|salary:float|email:str,title:str",
            "department|departments|name|headcount:int|cost_center:str",
            "leave_request|leave_requests|reason|days:int|employee_id:int,status:str",
            "payslip|payslips|period|net_pay:float|employee_id:int",
            "position|positions|title|openings:int|level:str",
            "review|reviews|summary|rating:int|employee_id:int",
            "timesheet|timesheets|week|hours:float|employee_id:int",
            "candidate|candidates|name|score:int|email:str,stage:str",
        ),
    ),
    "booking": (
        ("staybook", "roomly", "innkeeper", "bookingdesk"),
        (
            "room|rooms|number|nightly_rate:float|kind:str",
            "guest|guests|name|loyalty_points:int|email:str,phone:str",
            "booking|bookings|confirmation|nights:int|guest_id:int,room_id:int",
            "rate_plan|rate_plans|name|discount_percent:int|season:str",
            "property|properties|name|rooms_total:int|city:str",
            "housekeeping_task|housekeeping_tasks|note|priority:int|room_id:int",
        ),
    ),
    "school": (
        ("classbook", "campusly", "gradebook", "schoolyard"),
        (
            "student|students|full_name|year:int|email:str,cohort:str",
            "course|courses|title|credits:int|code:str",
            "enrollment|enrollments|term|attempts:int|student_id:int,course_id:int",
            "teacher|teachers|name|max_load:int|subject:str",
            "grade|grades|letter|points:float|enrollment_id:int",
            "assignment|assignments|title|max_points:int|course_id:int,due_date:str",
            "classroom|classrooms|code|seats:int|building:str",
        ),
    ),
    "events": (
        ("eventful", "ticketbox", "gatherly", "venuehub"),
        (
            "event|events|title|capacity:int|starts_at:str,city:str",
            "venue|venues|name|seats:int|address:str",
            "ticket|tickets|code|price:float|event_id:int,status:str",
            "attendee|attendees|name|tickets_bought:int|email:str",
            "speaker|speakers|name|talks:int|company:str",
            "session|sessions|title|duration_minutes:int|event_id:int",
            "sponsor|sponsors|company|contribution:float|tier:str",
        ),
    ),
    "crm": (
        ("leadflow", "dealdesk", "pipeliner", "clientele"),
        (
            "contact|contacts|full_name|score:int|email:str,phone:str",
            "lead|leads|source|estimated_value:float|status:str",
            "deal|deals|title|amount:float|stage:str,account_id:int",
            "account|accounts|name|employees:int|industry:str",
            "activity|activities|subject|duration_minutes:int|contact_id:int",
            "campaign|campaigns|name|budget:float|channel:str",
            "note|notes|body|pinned:int|contact_id:int",
        ),
    ),
    "recipes": (
        ("cookbook", "pantrypal", "mealmate", "souschef"),
        (
            "recipe|recipes|title|servings:int|cuisine:str,instructions:str",
            "ingredient|ingredients|name|calories:int|unit:str",
            "meal_plan|meal_plans|week|meals:int|owner_id:int",
            "shopping_list|shopping_lists|name|items_count:int|owner_id:int",
            "rating|ratings|comment|stars:int|recipe_id:int",
            "pantry_item|pantry_items|name|quantity:float|unit:str",
        ),
    ),
    "gym": (
        ("fitdesk", "repcount", "gymflow", "pulseclub"),
        (
            "member|members|name|visits:int|email:str,plan:str",
            "trainer|trainers|name|hourly_rate:float|specialty:str",
            "workout|workouts|title|duration_minutes:int|member_id:int",
            "class_session|class_sessions|title|spots:int|trainer_id:int,starts_at:str",
            "membership|memberships|tier|monthly_fee:float|member_id:int",
            "equipment|equipment_items|name|units:int|zone:str",
        ),
    ),
    "realty": (
        ("homefinder", "listingpro", "keystone", "openhouse"),
        (
            "listing|listings|headline|price:float|city:str,status:str",
            "agent|agents|name|commission_percent:float|email:str",
            "viewing|viewings|notes|attendees:int|listing_id:int",
            "offer|offers|buyer_name|amount:float|listing_id:int,status:str",
            "landlord|landlords|name|properties_owned:int|phone:str",
            "lease|leases|tenant_name|monthly_rent:float|listing_id:int",
        ),
    ),
    "helpdesk": (
        ("supportly", "deskline", "ticketflow", "helpbase"),
        (
            "ticket|tickets|subject|priority:int|status:str,requester:str",
            "agent|agents|name|open_tickets:int|email:str,team:str",
            "queue|queues|name|max_wait_minutes:int|channel:str",
            "reply|replies|body|attachments:int|ticket_id:int",
            "sla_policy|sla_policies|name|response_minutes:int|tier:str",
            "macro|macros|title|uses:int|body:str",
        ),
    ),
    "shipping": (
        ("parcelpoint", "shipwright", "courierly", "dispatchhub"),
        (
            "parcel|parcels|tracking_number|weight_kg:float|status:str,recipient:str",
            "courier|couriers|name|active_routes:int|phone:str",
            "delivery|deliveries|address|attempts:int|parcel_id:int",
            "manifest|manifests|reference|parcel_count:int|hub_id:int",
            "hub|hubs|code|throughput:int|city:str",
            "pickup|pickups|contact_name|packages:int|scheduled_for:str",
        ),
    ),
}

PROJECT_SUFFIXES = ("api", "service", "server", "backend", "core", "app")
JS_SERVICE_NAMES = ("gateway", "web", "bff", "edge", "portal")


def snake_to_camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p.capitalize() for p in rest)


def snake_to_pascal(name: str) -> str:
    return "".join(p.capitalize() for p in name.split("_"))


def snake_to_kebab(name: str) -> str:
    return name.replace("_", "-")


_WORD_RE = re.compile(r"[a-z0-9]+")


@dataclass(frozen=True)
class Field:
    name: str
    type: str  # str | int | float


@dataclass(frozen=True)
class Entity:
    """A business entity: ``product`` / ``products`` with its fields."""

    name: str  # snake singular
    plural: str  # snake plural
    label: Field  # a text field (name, title)
    number: Field  # an int or float field business logic updates
    extras: tuple[Field, ...]
    domain: str

    @property
    def fields(self) -> tuple[Field, ...]:
        return (self.label, self.number, *self.extras)

    def ctx(self) -> dict[str, str]:
        """Placeholder values naming this entity in both languages."""
        n, p = self.name, self.plural
        return {
            "entity": n,
            "entities": p,
            "Entity": snake_to_pascal(n),
            "Entities": snake_to_pascal(p),
            "entityC": snake_to_camel(n),
            "entitiesC": snake_to_camel(p),
            "table": p,
            "url": snake_to_kebab(p),
            "label": self.label.name,
            "labelC": snake_to_camel(self.label.name),
            "num": self.number.name,
            "numC": snake_to_camel(self.number.name),
            "num_type": self.number.type,
            "domain": self.domain,
        }


def parse_entity(spec: str, domain: str) -> Entity:
    """``"product|products|name|quantity:int|sku:str,price:float"`` → :class:`Entity`."""
    name, plural, label, number, *rest = spec.split("|")
    num_name, num_type = number.split(":")
    extras: list[Field] = []
    if rest and rest[0]:
        for part in rest[0].split(","):
            fname, ftype = part.split(":")
            extras.append(Field(fname, ftype))
    return Entity(
        name, plural, Field(label, "str"), Field(num_name, num_type), tuple(extras), domain
    )


ENTITIES: dict[str, tuple[Entity, ...]] = {
    d: tuple(parse_entity(s, d) for s in specs) for d, (_, specs) in DOMAINS.items()
}


def project_name(rng: random.Random, domain: str) -> tuple[str, str]:
    """``(display name, python package name)``, e.g. ``("shelfwise-api", "shelfwise")``."""
    stem = rng.choice(DOMAINS[domain][0])
    suffix = rng.choice(PROJECT_SUFFIXES)
    return f"{stem}-{suffix}", "_".join(_WORD_RE.findall(stem))


def secret_token(
    rng: random.Random, n: int, alphabet: str = "abcdefghijklmnopqrstuvwxyz0123456789"
) -> str:
    """A deterministic random-looking string (fake credentials in planted bugs)."""
    return "".join(rng.choice(alphabet) for _ in range(n))

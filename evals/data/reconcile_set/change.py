"""Change: a one-valued fact stopped being true because the world changed (a move, a new job, a
new number), so the careful answer is INVALIDATE of the old memory, not a correction, carrying
the new fact. Every family uses a one-valued predicate (dspy_memory.util.text.SINGLE_VALUED_PREDICATES)
and shows one memory of that slot, so the rule-based oracle decides these cases too. Cases whose
turns give a relative date carry the resolved date as `expected_valid_at`."""

from __future__ import annotations

from datetime import date, timedelta

from evals.data.reconcile_set.kit import CITIES, EMPLOYERS, case, day, fact, filler

PARTNERS = ["Jonah", "Marisol", "Anders", "Chidi", "Sakura", "Beatriz", "Tobias", "Layla", "Emil", "Niamh"]
STARTUPS = ["Fernway", "Quillbox", "Tidepool AI", "Brightloop", "Mossgrove"]
STREETS = ["4 Elm Row", "27 Harbour Lane", "9 Canal Street", "112 Orchard Road", "3 Mill Yard"]
CARS = ["Ford Focus", "Vauxhall Astra", "Peugeot 208", "Honda Jazz", "VW Golf"]
NEW_CARS = ["Kia EV6", "Tesla Model 3", "Renault Zoe", "Hyundai Ioniq 5", "Nissan Leaf"]
TOWNS = ["Hebden Bridge", "Sintra", "Ithaca", "Bruges", "Hallstatt"]


def _since(rng):
    return day(rng, date(2022, 1, 1), 560)


def _last(when: date, weekday: int) -> date:
    """The latest `weekday` (Monday 0) strictly before `when`."""
    return when - timedelta(days=(when.weekday() - weekday - 1) % 7 + 1)


def _first_of_last_month(when: date) -> date:
    return (when.replace(day=1) - timedelta(days=1)).replace(day=1)


def _invalidate(existing, old):
    return [{"action": "INVALIDATE", "target": existing.index(old) + 1, "correction": False}]


def moved_city_announced(rng, p, when):
    a, b = rng.sample(CITIES, 2)
    old = fact(f"{p} lives in {a}.", p, "lives_in", a, day(rng, date(2023, 1, 1)), "profile")
    existing = [*filler(rng, p, rng.randrange(3), {a, b}), old]
    rng.shuffle(existing)
    moved = when - timedelta(days=rng.randrange(1, 20))
    new = [fact(f"{p} moved to {b} on {moved.isoformat()}.", p, "lives_in", b, moved, "profile")]
    turn = f"Big news: I left {a} and moved to {b} on {moved.strftime('%B %d')}."
    return case("change", p, when, [turn], existing, new, _invalidate(existing, old))


def followed_partner_for_work(rng, p, when):
    a, b = rng.sample(CITIES, 2)
    partner = rng.choice(PARTNERS)
    old = fact(f"{p} lives in {a}.", p, "lives_in", a, _since(rng), "profile")
    theirs = fact(
        f"{partner} is a structural engineer.", partner, "job", "structural engineer", _since(rng), "profile"
    )
    existing = [old, theirs, *filler(rng, p, rng.randrange(2), {a, b})]
    rng.shuffle(existing)
    moved = when.replace(day=1)
    turn = (
        f"So {partner} got the job in {b}, which means... yeah. We packed up the whole flat and "
        f"we've been living in {b} since the start of the month. Still finding boxes."
    )
    new = [fact(f"{p} has lived in {b} since {moved.isoformat()}.", p, "lives_in", b, moved, "profile")]
    return case(
        "change",
        p,
        when,
        [turn],
        existing,
        new,
        _invalidate(existing, old),
        expected_valid_at=moved.isoformat(),
    )


def new_street_same_city(rng, p, when):
    city = rng.choice(CITIES)
    before, after = rng.sample(STREETS, 2)
    old = fact(f"{p}'s address is {before}, {city}.", p, "address", before, _since(rng), "profile")
    existing = [*filler(rng, p, 2, {city}), old]
    rng.shuffle(existing)
    turn = f"New address for your records: {after}. Same city, bigger kitchen, worse parking."
    new = [fact(f"{p}'s address is {after}, {city}.", p, "address", after, when, "profile")]
    return case("change", p, when, [turn], existing, new, _invalidate(existing, old))


def quit_for_a_startup(rng, p, when):
    employer, startup = rng.choice(EMPLOYERS), rng.choice(STARTUPS)
    old = fact(f"{p} works at {employer}.", p, "works_at", employer, _since(rng), "profile")
    existing = [old, *filler(rng, p, 1 + rng.randrange(2), set())]
    rng.shuffle(existing)
    started = _last(when, 0)
    turns = [
        f"Handed in my badge at {employer} — felt strange after all those years.",
        f"First day at {startup} was on Monday!",
    ]
    new = [
        fact(
            f"{p} has worked at {startup} since {started.isoformat()}.",
            p,
            "works_at",
            startup,
            started,
            "profile",
        )
    ]
    return case(
        "change",
        p,
        when,
        turns,
        existing,
        new,
        _invalidate(existing, old),
        expected_valid_at=started.isoformat(),
    )


def promotion_celebrated(rng, p, when):
    before, after = rng.choice(
        [("junior designer", "senior designer"), ("analyst", "team lead"), ("associate", "partner")]
    )
    old = fact(f"{p} is a {before}.", p, "job_title", before, _since(rng), "profile")
    existing = [*filler(rng, p, rng.randrange(3), set()), old]
    rng.shuffle(existing)
    turn = f"GOT THE PROMOTION!!! {after} as of today 🎉🎉 drinks on me"
    new = [
        fact(f"{p} was promoted to {after} on {when.isoformat()}.", p, "job_title", after, when, "profile")
    ]
    return case("change", p, when, [turn], existing, new, _invalidate(existing, old))


def proposal_accepted(rng, p, when):
    partner = rng.choice(PARTNERS)
    old = fact(f"{p} is single.", p, "status", "single", _since(rng), "profile")
    existing = [old, *filler(rng, p, 2, set())]
    rng.shuffle(existing)
    turns = [
        f"You know how {partner} and I went to the coast this weekend?",
        "We're ENGAGED. I said yes on the beach 💍",
    ]
    new = [
        fact(f"{p} got engaged to {partner} on {when.isoformat()}.", p, "status", "engaged", when, "profile")
    ]
    return case("change", p, when, turns, existing, new, _invalidate(existing, old))


def divorce_finalised(rng, p, when):
    spouse = rng.choice(PARTNERS)
    old = fact(f"{p} is married to {spouse}.", p, "married_to", spouse, _since(rng), "profile")
    existing = [*filler(rng, p, 1 + rng.randrange(2), {spouse}), old]
    rng.shuffle(existing)
    final = _first_of_last_month(when)
    turn = f"The divorce from {spouse} was finalised last month. Onwards, I suppose."
    new = [
        fact(
            f"{p} and {spouse} divorced in {final.strftime('%B %Y')}.", p, "married_to", None, final, "event"
        )
    ]
    return case(
        "change",
        p,
        when,
        [turn],
        existing,
        new,
        _invalidate(existing, old),
        expected_valid_at=final.isoformat(),
    )


def new_number_texting(rng, p, when):
    before = f"0176 {rng.randrange(1000, 9999)} {rng.randrange(1000, 9999)}"
    after = f"0157 {rng.randrange(1000, 9999)} {rng.randrange(1000, 9999)}"
    old = fact(f"{p}'s mobile number is {before}.", p, "phone", before, _since(rng), "profile")
    existing = [old, *filler(rng, p, rng.randrange(3), set())]
    rng.shuffle(existing)
    turn = f"new number!! {after} — old sim died in the lake, don't ask"
    new = [fact(f"{p}'s mobile number is now {after}.", p, "phone", after, when, "profile")]
    return case("change", p, when, [turn], existing, new, _invalidate(existing, old))


def work_mailbox_retired(rng, p, when):
    user = p.lower()
    before, after = f"{user}@oldmail.example", f"{user}.office@northwind.example"
    old = fact(f"{p}'s email address is {before}.", p, "email", before, _since(rng), "profile")
    existing = [*filler(rng, p, 2, set()), old]
    rng.shuffle(existing)
    turn = f"Please use {after} from now on; the {before} mailbox is being shut down at the end of this week."
    new = [fact(f"{p}'s email address is {after}.", p, "email", after, when, "profile")]
    return case("change", p, when, [turn], existing, new, _invalidate(existing, old))


def vegan_since_new_year(rng, p, when):
    old = fact(f"{p} is vegetarian.", p, "diet", "vegetarian", _since(rng), "profile")
    existing = [old, *filler(rng, p, 1 + rng.randrange(2), set())]
    rng.shuffle(existing)
    began = date(when.year, 1, 1)
    turn = "Dropped dairy and eggs as well since January — fully plant-based now, and honestly I feel great."
    new = [fact(f"{p} has been vegan since {began.isoformat()}.", p, "diet", "vegan", began, "profile")]
    return case(
        "change",
        p,
        when,
        [turn],
        existing,
        new,
        _invalidate(existing, old),
        expected_valid_at=began.isoformat(),
    )


def keto_abandoned(rng, p, when):
    old = fact(f"{p} follows a keto diet.", p, "diet", "keto", _since(rng), "profile")
    existing = [*filler(rng, p, rng.randrange(3), set()), old]
    rng.shuffle(existing)
    turn = "I'm done with keto. Bread is back in my life and I am not sorry about it."
    new = [
        fact(
            f"{p} has stopped the keto diet and eats carbohydrates again.",
            p,
            "diet",
            "unrestricted",
            when,
            "profile",
        )
    ]
    return case("change", p, when, [turn], existing, new, _invalidate(existing, old))


def traded_in_last_saturday(rng, p, when):
    before, after = rng.choice(CARS), rng.choice(NEW_CARS)
    old = fact(f"{p} drives a {before}.", p, "car", before, _since(rng), "profile")
    existing = [old, *filler(rng, p, 2, set())]
    rng.shuffle(existing)
    bought = _last(when, 5)
    turn = f"Traded in the {before} — picked up a {after} last Saturday. Charging it is a whole new hobby."
    new = [fact(f"{p} has driven a {after} since {bought.isoformat()}.", p, "car", after, bought, "profile")]
    return case(
        "change",
        p,
        when,
        [turn],
        existing,
        new,
        _invalidate(existing, old),
        expected_valid_at=bought.isoformat(),
    )


def off_night_shifts(rng, p, when):
    old = fact(f"{p} works night shifts at the hospital.", p, "works_shift", "nights", _since(rng), "profile")
    existing = [*filler(rng, p, 1 + rng.randrange(2), set()), old]
    rng.shuffle(existing)
    turns = [
        "Finally!",
        "The rota switched me to days — 7 till 3 — starting today. I might see sunlight again.",
    ]
    new = [
        fact(
            f"{p} works day shifts, 7 am to 3 pm, from {when.isoformat()}.",
            p,
            "works_shift",
            "days",
            when,
            "profile",
        )
    ]
    return case("change", p, when, turns, existing, new, _invalidate(existing, old))


def turned_thirty(rng, p, when):
    old = fact(
        f"{p} is 29 years old.", p, "age", "29", when - timedelta(days=300 + rng.randrange(60)), "profile"
    )
    existing = [old, *filler(rng, p, rng.randrange(3), set())]
    rng.shuffle(existing)
    turn = "Big three-oh today. Feeling ancient, send cake."
    new = [fact(f"{p} turned 30 on {when.isoformat()}.", p, "age", "30", when, "profile")]
    return case("change", p, when, [turn], existing, new, _invalidate(existing, old))


def new_partner_after_split(rng, p, when):
    before, after = rng.sample(PARTNERS, 2)
    old = fact(f"{p}'s partner is {before}.", p, "partner", before, _since(rng), "profile")
    existing = [*filler(rng, p, 2, {before, after}), old]
    rng.shuffle(existing)
    turns = [
        f"{before} and I split up over the summer, it was mutual.",
        f"Anyway! I'm seeing {after} now and it's going really well.",
    ]
    new = [fact(f"{p}'s partner is {after}.", p, "partner", after, when, "profile")]
    return case("change", p, when, turns, existing, new, _invalidate(existing, old))


def moved_back_portuguese(rng, p, when):
    home, away = rng.choice(["Porto", "Lisbon"]), rng.choice(["Toronto", "Boston", "Madrid"])
    old = fact(f"{p} lives in {away}.", p, "lives_in", away, _since(rng), "profile")
    existing = [old, *filler(rng, p, 1 + rng.randrange(2), {home, away})]
    rng.shuffle(existing)
    moved = when.replace(day=1)
    turn = f"Voltei pra casa! Back in {home} for good since the 1st. Saudades de {away}? Um pouco."
    new = [fact(f"{p} moved back to {home} on {moved.isoformat()}.", p, "lives_in", home, moved, "profile")]
    return case(
        "change",
        p,
        when,
        [turn],
        existing,
        new,
        _invalidate(existing, old),
        expected_valid_at=moved.isoformat(),
    )


def moved_in_with_partner(rng, p, when):
    partner = rng.choice(PARTNERS)
    area = rng.choice(["Clifton", "Kreuzberg", "Le Plateau", "Bairro Alto"])
    old = fact(f"{p} rents a studio flat on their own.", p, "home", "studio flat", _since(rng), "profile")
    existing = [*filler(rng, p, rng.randrange(3), set()), old]
    rng.shuffle(existing)
    turn = f"Gave up the studio — I'm living at {partner}'s place in {area} now. We made it official, shared keys and all."
    new = [fact(f"{p} lives with {partner} in {partner}'s home in {area}.", p, "home", area, when, "profile")]
    return case("change", p, when, [turn], existing, new, _invalidate(existing, old))


def went_freelance_german(rng, p, when):
    employer = rng.choice(EMPLOYERS)
    old = fact(f"{p} is employed by {employer}.", p, "employer", employer, _since(rng), "profile")
    existing = [old, *filler(rng, p, 2, set())]
    rng.shuffle(existing)
    began = _first_of_last_month(when)
    turn = f"Ich bin jetzt selbstständig! Left {employer} at the start of last month to translate freelance."
    new = [
        fact(
            f"{p} has been a self-employed freelance translator since {began.isoformat()}.",
            p,
            "employer",
            "self-employed",
            began,
            "profile",
        )
    ]
    return case(
        "change",
        p,
        when,
        [turn],
        existing,
        new,
        _invalidate(existing, old),
        expected_valid_at=began.isoformat(),
    )


def career_switch_rambling(rng, p, when):
    old = fact(f"{p} works as an accountant.", p, "job", "accountant", _since(rng), "profile")
    existing = [*filler(rng, p, 1 + rng.randrange(2), set()), old]
    rng.shuffle(existing)
    turn = (
        "Remember how I never stopped moaning about spreadsheets? Well. I did the apprenticeship at night, "
        "passed the last assessment, and as of this week I'm a qualified carpenter, working with wood full-time. "
        "No more ledgers. Ever."
    )
    new = [fact(f"{p} works as a qualified carpenter.", p, "job", "carpenter", when, "profile")]
    return case("change", p, when, [turn], existing, new, _invalidate(existing, old))


def transferred_by_the_company(rng, p, when):
    a, b = rng.sample(CITIES, 2)
    colleague = rng.choice(PARTNERS)
    old = fact(f"{p} lives in {a}.", p, "lives_in", a, _since(rng), "profile")
    theirs = fact(f"{colleague} lives in {b}.", colleague, "lives_in", b, _since(rng), "profile")
    existing = [old, theirs]
    rng.shuffle(existing)
    moved = when - timedelta(days=14)
    turn = f"HQ transferred me to the {b} office, so I've been living there for two weeks now — {colleague} showed me around."
    new = [
        fact(
            f"{p} moved to {b} on {moved.isoformat()} after a work transfer.",
            p,
            "lives_in",
            b,
            moved,
            "profile",
        )
    ]
    return case(
        "change",
        p,
        when,
        [turn],
        existing,
        new,
        _invalidate(existing, old),
        expected_valid_at=moved.isoformat(),
    )


def dorm_to_shared_flat(rng, p, when):
    hall, street = rng.choice(["Rutherford Hall", "Meadow Halls", "Block C"]), rng.choice(STREETS)
    old = fact(
        f"{p}'s address is Room 214, {hall}, student residences.", p, "address", hall, _since(rng), "profile"
    )
    existing = [old, *filler(rng, p, rng.randrange(3), set())]
    rng.shuffle(existing)
    turn = f"out of the dorms at last!! new place is {street}, sharing w/ two girls from my course"
    new = [fact(f"{p}'s address is {street}, a shared flat.", p, "address", street, when, "profile")]
    return case("change", p, when, [turn], existing, new, _invalidate(existing, old))


def number_changed_not_the_friends(rng, p, when):
    friend = rng.choice(PARTNERS)
    mine, theirs, after = (f"+44 7700 {rng.randrange(100000, 999999)}" for _ in range(3))
    old = fact(f"{p}'s phone number is {mine}.", p, "phone", mine, _since(rng), "profile")
    other = fact(f"{friend}'s phone number is {theirs}.", friend, "phone", theirs, _since(rng), "profile")
    existing = [old, other, *filler(rng, p, rng.randrange(2), set())]
    rng.shuffle(existing)
    turn = f"{friend}'s number hasn't changed, but mine has — it's {after} now."
    new = [fact(f"{p}'s phone number is {after}.", p, "phone", after, when, "profile")]
    return case("change", p, when, [turn], existing, new, _invalidate(existing, old))


def car_written_off(rng, p, when):
    before, after = rng.choice(CARS), rng.choice(["Skoda Octavia", "Mazda 3", "Toyota Yaris"])
    old = fact(f"{p} drives a {before}.", p, "car", before, _since(rng), "profile")
    existing = [*filler(rng, p, 2, set()), old]
    rng.shuffle(existing)
    turns = [
        f"Some idiot rear-ended me at a red light. The {before} is a write-off.",
        f"Insurance paid out, so now I'm driving a second-hand {after}.",
    ]
    new = [fact(f"{p} drives a second-hand {after}.", p, "car", after, when, "profile")]
    return case("change", p, when, turns, existing, new, _invalidate(existing, old))


def retired_last_friday(rng, p, when):
    job = rng.choice(["bus driver", "postal worker", "dental hygienist"])
    old = fact(f"{p} is employed full-time as a {job}.", p, "status", "employed", _since(rng), "profile")
    existing = [old, *filler(rng, p, 1 + rng.randrange(2), set())]
    rng.shuffle(existing)
    retired = _last(when, 4)
    turn = "Last shift was Friday — I'm officially RETIRED. The garden won't know what hit it."
    new = [fact(f"{p} retired on {retired.isoformat()}.", p, "status", "retired", retired, "profile")]
    return case(
        "change",
        p,
        when,
        [turn],
        existing,
        new,
        _invalidate(existing, old),
        expected_valid_at=retired.isoformat(),
    )


def back_from_parental_leave(rng, p, when):
    months = rng.choice(["six", "eight", "twelve"])
    old = fact(f"{p} is on parental leave.", p, "status", "parental leave", _since(rng), "profile")
    existing = [*filler(rng, p, rng.randrange(3), set()), old]
    rng.shuffle(existing)
    turn = (
        f"Back at my desk today after {months} months of parental leave. Everyone's got new laptops. Weird."
    )
    new = [
        fact(
            f"{p} returned to work on {when.isoformat()} after parental leave.",
            p,
            "status",
            "working",
            when,
            "profile",
        )
    ]
    return case("change", p, when, [turn], existing, new, _invalidate(existing, old))


def four_day_week_approved(rng, p, when):
    old = fact(
        f"{p} works Monday to Friday, nine to five.", p, "works_shift", "Mon-Fri", _since(rng), "profile"
    )
    existing = [old, *filler(rng, p, 2, set())]
    rng.shuffle(existing)
    turns = [
        "HR finally replied.",
        "Request approved: four-day week, Monday to Thursday, Fridays are mine now.",
    ]
    new = [
        fact(f"{p} works a four-day week, Monday to Thursday.", p, "works_shift", "Mon-Thu", when, "profile")
    ]
    return case("change", p, when, turns, existing, new, _invalidate(existing, old))


def stopped_eating_meat_hindi(rng, p, when):
    old = fact(f"{p} eats meat.", p, "diet", "omnivore", _since(rng), "profile")
    existing = [*filler(rng, p, 1 + rng.randrange(2), set()), old]
    rng.shuffle(existing)
    turn = "Ab main non-veg bilkul nahi khaata — I've gone fully vegetarian, chicken included."
    new = [
        fact(f"{p} has become vegetarian and no longer eats meat.", p, "diet", "vegetarian", when, "profile")
    ]
    return case("change", p, when, [turn], existing, new, _invalidate(existing, old))


def company_rebrand_email(rng, p, when):
    old_brand, new_brand = rng.choice(
        [("globex", "hyperion"), ("initech", "initrode"), ("acme", "acmeworks")]
    )
    user = p.lower()
    before, after = f"{user}@{old_brand}.example", f"{user}@{new_brand}.example"
    old = fact(f"{p}'s work email is {before}.", p, "email", before, _since(rng), "profile")
    existing = [old, *filler(rng, p, rng.randrange(3), set())]
    rng.shuffle(existing)
    turn = f"Heads up: we rebranded, so my work email is {after} now. The old one bounces."
    new = [fact(f"{p}'s work email is {after}.", p, "email", after, when, "profile")]
    return case("change", p, when, [turn], existing, new, _invalidate(existing, old))


def mother_into_care_home(rng, p, when):
    mother = rng.choice(["Margaret", "Fatima", "Ingeborg", "Rosalind", "Mercedes"])
    town = rng.choice(TOWNS)
    old = fact(
        f"{mother}, {p}'s mother, lives alone in the family house.",
        mother,
        "lives_in",
        "family house",
        _since(rng),
        "profile",
    )
    mine = fact(f"{p} lives in {rng.choice(CITIES)}.", p, "lives_in", None, _since(rng), "profile")
    existing = [old, mine]
    rng.shuffle(existing)
    moved = when - timedelta(days=7)
    turn = f"Mum finally moved into the care home in {town} last week. Hard day, but she's safer there."
    new = [
        fact(
            f"{mother} moved into a care home in {town} on {moved.isoformat()}.",
            mother,
            "lives_in",
            town,
            moved,
            "profile",
        )
    ]
    return case(
        "change",
        p,
        when,
        [turn],
        existing,
        new,
        _invalidate(existing, old),
        expected_valid_at=moved.isoformat(),
    )


def colleague_stays_i_leave(rng, p, when):
    employer, startup = rng.choice(EMPLOYERS), rng.choice(STARTUPS)
    colleague = rng.choice(PARTNERS)
    old = fact(f"{p} works at {employer}.", p, "works_at", employer, _since(rng), "profile")
    theirs = fact(
        f"{colleague} works at {employer}.", colleague, "works_at", employer, _since(rng), "profile"
    )
    existing = [theirs, old, *filler(rng, p, rng.randrange(2), set())]
    rng.shuffle(existing)
    began = when - timedelta(days=14)
    turn = f"{colleague}'s staying put at {employer}, but I jumped ship to {startup} two weeks ago."
    new = [
        fact(
            f"{p} has worked at {startup} since {began.isoformat()}.",
            p,
            "works_at",
            startup,
            began,
            "profile",
        )
    ]
    return case(
        "change",
        p,
        when,
        [turn],
        existing,
        new,
        _invalidate(existing, old),
        expected_valid_at=began.isoformat(),
    )


def houseboat_sold(rng, p, when):
    town = rng.choice(TOWNS)
    old = fact(f"{p} lives on a narrowboat on the canal.", p, "home", "narrowboat", _since(rng), "profile")
    existing = [*filler(rng, p, 2, set()), old]
    rng.shuffle(existing)
    turn = f"We sold the boat! Living on dry land again — a little stone cottage just outside {town}."
    new = [fact(f"{p} lives in a stone cottage outside {town}.", p, "home", "cottage", when, "profile")]
    return case("change", p, when, [turn], existing, new, _invalidate(existing, old))


def headteacher_appointment_formal(rng, p, when):
    school = rng.choice(["Hillside Primary", "St Brigid's School", "Eastbrook Academy"])
    old = fact(
        f"{p} is a maths teacher at {school}.", p, "job_title", "maths teacher", _since(rng), "profile"
    )
    existing = [old, *filler(rng, p, rng.randrange(3), set())]
    rng.shuffle(existing)
    began = when.replace(day=1)
    turn = f"I am writing to confirm that, with effect from {began.strftime('%d %B %Y')}, I hold the post of headteacher at {school}."
    new = [
        fact(
            f"{p} has been headteacher of {school} since {began.isoformat()}.",
            p,
            "job_title",
            "headteacher",
            began,
            "profile",
        )
    ]
    return case("change", p, when, [turn], existing, new, _invalidate(existing, old))


TEMPLATES = [
    moved_city_announced,
    followed_partner_for_work,
    new_street_same_city,
    quit_for_a_startup,
    promotion_celebrated,
    proposal_accepted,
    divorce_finalised,
    new_number_texting,
    work_mailbox_retired,
    vegan_since_new_year,
    keto_abandoned,
    traded_in_last_saturday,
    off_night_shifts,
    turned_thirty,
    new_partner_after_split,
    moved_back_portuguese,
    moved_in_with_partner,
    went_freelance_german,
    career_switch_rambling,
    transferred_by_the_company,
    dorm_to_shared_flat,
    number_changed_not_the_friends,
    car_written_off,
    retired_last_friday,
    back_from_parental_leave,
    four_day_week_approved,
    stopped_eating_meat_hindi,
    company_rebrand_email,
    mother_into_care_home,
    colleague_stays_i_leave,
    houseboat_sold,
    headteacher_appointment_formal,
]

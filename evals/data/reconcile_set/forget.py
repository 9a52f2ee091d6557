"""Forget: the speaker explicitly asks that something remembered be forgotten, so the careful
answer is DELETE of exactly the memories the request is about, and nothing else (a request to
forget carries no new facts). The write path deletes only on a request its forget pattern
recognises (WriteConfig.forget_pattern) and only memories sharing a word with the request, so
every family words its request that way; the families differ in what is forgotten, why, how
directly, and in which register."""

from __future__ import annotations

from datetime import date

from evals.data.reconcile_set.kit import CITIES, EMPLOYERS, HOBBIES, case, day, fact, filler

MEN = ["Rafa", "Oluwaseun", "Matteo", "Kenji", "Tadeo"]
WOMEN = ["Dagny", "Priyanka", "Saoirse", "Valentina", "Ngozi"]
THERAPISTS = ["Dr. Okafor", "Dr. Lindqvist", "Dr. Bhattacharya", "Dr. Moreau"]


def _said(rng):
    return day(rng, date(2022, 6, 1), 520)


def _deleted(existing, *targets):
    return [{"action": "DELETE", "target": existing.index(target) + 1} for target in targets]


def hobby_forgotten(rng, p, when):
    hobby = rng.choice(HOBBIES)
    old = fact(f"{p} enjoys {hobby}.", p, "likes", hobby, day(rng, date(2023, 1, 1)), "preference")
    existing = [*filler(rng, p, 1 + rng.randrange(2), {hobby}), old]
    rng.shuffle(existing)
    request = rng.choice(
        [
            f"Please forget that I like {hobby}.",
            f"Delete what you know about me and {hobby}.",
            f"Don't remember the {hobby} thing anymore, please.",
        ]
    )
    return case("forget", p, when, [request], existing, [], _deleted(existing, old))


def ex_after_breakup(rng, p, when):
    ex = rng.choice(MEN + WOMEN)
    old = fact(f"{p} is dating {ex}.", p, "dating", ex, _said(rng), "profile")
    existing = [old, *filler(rng, p, 2, {ex})]
    rng.shuffle(existing)
    turns = [
        "Long story, and I don't want to get into it.",
        f"Can you delete the stuff about {ex}? All of it.",
    ]
    return case("forget", p, when, turns, existing, [], _deleted(existing, old))


def diagnosis_kept_private(rng, p, when):
    condition = rng.choice(["depression", "ADHD", "an anxiety disorder", "bipolar disorder"])
    old = fact(
        f"{p} has been diagnosed with {condition}.", p, "diagnosed_with", condition, _said(rng), "profile"
    )
    existing = [*filler(rng, p, rng.randrange(3), set()), old]
    rng.shuffle(existing)
    turn = f"I'd rather you didn't hold on to my {condition.removeprefix('an ')} diagnosis. Please don't keep that on file."
    return case("forget", p, when, [turn], existing, [], _deleted(existing, old))


def locker_code_overshared(rng, p, when):
    code = f"{rng.randrange(1000, 9999)}"
    old = fact(f"{p}'s gym locker code is {code}.", p, "locker_code", code, _said(rng))
    existing = [old, *filler(rng, p, 1 + rng.randrange(2), set())]
    rng.shuffle(existing)
    turn = "Scratch that locker code — erase it, I really shouldn't have typed it in here."
    return case("forget", p, when, [turn], existing, [], _deleted(existing, old))


def salary_off_the_record(rng, p, when):
    salary = rng.choice(["$85,000", "€52,000", "£47,500"])
    old = fact(f"{p}'s salary is {salary} a year.", p, "salary", salary, _said(rng), "profile")
    employer = rng.choice(EMPLOYERS)
    job = fact(f"{p} works at {employer}.", p, "works_at", employer, _said(rng), "profile")
    existing = [old, job]
    rng.shuffle(existing)
    turn = "Hmm, wipe the salary figure please. Money stuff stays off the record."
    return case("forget", p, when, [turn], existing, [], _deleted(existing, old))


def estranged_brother_only(rng, p, when):
    brother, sister = rng.choice(MEN), rng.choice(WOMEN)
    his = fact(f"{p}'s brother is {brother}.", p, "brother", brother, _said(rng), "profile")
    hers = fact(f"{p}'s sister is {sister}.", p, "sister", sister, _said(rng), "profile")
    existing = [his, hers, *filler(rng, p, rng.randrange(2), set())]
    rng.shuffle(existing)
    turn = f"You can forget about my brother {brother}; we haven't spoken in years and that's fine."
    return case("forget", p, when, [turn], existing, [], _deleted(existing, his))


def both_addresses(rng, p, when):
    city = rng.choice(CITIES)
    home = fact(
        f"{p}'s home address is 18 Linden Avenue, {city}.",
        p,
        "address",
        "18 Linden Avenue",
        _said(rng),
        "profile",
    )
    office = fact(
        f"{p}'s office address is 200 Dock Road, {city}.", p, "office_address", "200 Dock Road", _said(rng)
    )
    existing = [home, office, *filler(rng, p, 1 + rng.randrange(2), {city})]
    rng.shuffle(existing)
    turns = ["Doing a bit of a privacy clean-up.", "Delete both addresses — the home one and the office one."]
    return case("forget", p, when, turns, existing, [], _deleted(existing, home, office))


def tattoo_texting(rng, p, when):
    design, place = rng.choice(
        [("a koi fish", "left shoulder"), ("a compass", "forearm"), ("a swallow", "ankle")]
    )
    old = fact(
        f"{p} has a tattoo of {design} on the {place}.", p, "has_tattoo", design, _said(rng), "profile"
    )
    existing = [*filler(rng, p, 2, set()), old]
    rng.shuffle(existing)
    turn = "pls delete the thing abt my tattoo lol my mum reads over my shoulder"
    return case("forget", p, when, [turn], existing, [], _deleted(existing, old))


def date_of_birth_gdpr(rng, p, when):
    born = date(rng.randrange(1960, 2000), rng.randrange(1, 13), rng.randrange(1, 28))
    old = fact(
        f"{p}'s date of birth is {born.isoformat()}.",
        p,
        "date_of_birth",
        born.isoformat(),
        _said(rng),
        "profile",
    )
    existing = [old, *filler(rng, p, rng.randrange(3), set())]
    rng.shuffle(existing)
    turn = (
        "Under the GDPR, I formally request that you delete my date of birth from your records "
        "and confirm once this has been done."
    )
    return case("forget", p, when, [turn], existing, [], _deleted(existing, old))


def workplace_feels_creepy(rng, p, when):
    employer = rng.choice(EMPLOYERS)
    old = fact(f"{p} works at {employer}.", p, "works_at", employer, _said(rng), "profile")
    existing = [*filler(rng, p, 1 + rng.randrange(2), set()), old]
    rng.shuffle(existing)
    turn = f"It's a bit creepy that you know I'm at {employer}. Stop remembering that, please."
    return case("forget", p, when, [turn], existing, [], _deleted(existing, old))


def ex_husband_french(rng, p, when):
    ex = rng.choice(["Laurent", "Didier", "Olivier"])
    old = fact(f"{p}'s ex-husband is named {ex}.", p, "ex_spouse", ex, _said(rng), "profile")
    existing = [old, *filler(rng, p, 2, set())]
    rng.shuffle(existing)
    turn = "Oublie ça, s'il te plaît — forget my ex-husband entirely. C'est fini."
    return case("forget", p, when, [turn], existing, [], _deleted(existing, old))


def surgery_spanish(rng, p, when):
    body = rng.choice(["knee", "shoulder", "hip"])
    old = fact(f"{p} had {body} surgery in March 2023.", p, "had_surgery", body, date(2023, 3, 1), "event")
    existing = [*filler(rng, p, rng.randrange(3), set()), old]
    rng.shuffle(existing)
    turn = "Bórralo, por favor: remove the part about my surgery. Prefiero no hablar de eso."
    return case("forget", p, when, [turn], existing, [], _deleted(existing, old))


def home_address_german(rng, p, when):
    street = rng.choice(["Lindenstraße 7", "Am Kanal 22", "Bergweg 3"])
    old = fact(f"{p}'s home address is {street}, Berlin.", p, "address", street, _said(rng), "profile")
    existing = [old, *filler(rng, p, 1 + rng.randrange(2), set())]
    rng.shuffle(existing)
    turn = "Vergiss das bitte — don't store my home address anywhere. Datenschutz, you know."
    return case("forget", p, when, [turn], existing, [], _deleted(existing, old))


def daughters_grades(rng, p, when):
    kid = rng.choice(["Elif", "Maren", "Zoe", "Anaya"])
    old = fact(f"{p}'s daughter {kid} failed maths this term.", p, "daughter", kid, _said(rng), "event")
    kid_fact = fact(f"{p}'s daughter {kid} plays netball.", p, "daughter_sport", "netball", _said(rng))
    existing = [old, kid_fact, *filler(rng, p, rng.randrange(2), set())]
    rng.shuffle(existing)
    turn = f"{kid} would be mortified. Please remove what you have about her failing maths."
    return case("forget", p, when, [turn], existing, [], _deleted(existing, old))


def debt_regretted(rng, p, when):
    amount = rng.choice(["$12,000", "£8,500", "€20,000"])
    old = fact(f"{p} owes {amount} in credit card debt.", p, "owes", amount, _said(rng))
    existing = [*filler(rng, p, 2, set()), old]
    rng.shuffle(existing)
    turns = [
        "I was in a bad place last week when I told you about the money.",
        "Can you wipe that? The debt thing.",
    ]
    return case("forget", p, when, turns, existing, [], _deleted(existing, old))


def job_search_purged(rng, p, when):
    first, second = rng.sample(["Stripe", "Spotify", "Shopify", "Canva", "Atlassian"], 2)
    applied = fact(
        f"{p} applied to {first} for a product manager role.", p, "applied_to", first, _said(rng), "event"
    )
    interview = fact(
        f"{p} had a job interview at {second}.", p, "interviewed_at", second, _said(rng), "event"
    )
    existing = [applied, interview, *filler(rng, p, 1 + rng.randrange(2), set())]
    rng.shuffle(existing)
    turn = f"Purge everything about my job search — the {first} application, the {second} interview, all of it. My boss uses this laptop."
    return case("forget", p, when, [turn], existing, [], _deleted(existing, applied, interview))


def friends_secret(rng, p, when):
    friend = rng.choice(WOMEN)
    old = fact(
        f"{friend} is thinking of leaving her husband.", friend, "considering", "leaving husband", _said(rng)
    )
    existing = [old, *filler(rng, p, 2, set())]
    rng.shuffle(existing)
    turn = f"Please don't remember what I said about {friend} leaving her husband. That wasn't mine to share."
    return case("forget", p, when, [turn], existing, [], _deleted(existing, old))


def two_medications(rng, p, when):
    first = fact(f"{p} takes sertraline every morning.", p, "takes_medication", "sertraline", _said(rng))
    second = fact(f"{p} takes ibuprofen for back pain.", p, "takes_medication", "ibuprofen", _said(rng))
    existing = [first, second, *filler(rng, p, rng.randrange(3), set())]
    rng.shuffle(existing)
    turn = "Remove the sertraline and the ibuprofen from whatever you keep on me. Meds are nobody's business."
    return case("forget", p, when, [turn], existing, [], _deleted(existing, first, second))


def gym_schedule_terse(rng, p, when):
    old = fact(
        f"{p}'s gym schedule is Monday, Wednesday and Friday at 7 am.", p, "gym_schedule", None, _said(rng)
    )
    existing = [*filler(rng, p, 2, set()), old]
    rng.shuffle(existing)
    turn = "delete: gym schedule"
    return case("forget", p, when, [turn], existing, [], _deleted(existing, old))


def therapist_name_rambling(rng, p, when):
    therapist = rng.choice(THERAPISTS)
    old = fact(f"{p}'s therapist is {therapist}.", p, "therapist", therapist, _said(rng), "profile")
    existing = [old, *filler(rng, p, 1 + rng.randrange(2), set())]
    rng.shuffle(existing)
    turn = (
        "Hey, so, this might sound odd, but I've been reading about privacy a lot lately and I'd "
        "feel better if you could forget my therapist's name. Nothing personal!"
    )
    return case("forget", p, when, [turn], existing, [], _deleted(existing, old))


def keep_one_drop_the_other(rng, p, when):
    city = rng.choice(CITIES)
    address = fact(
        f"{p}'s address is 5 Quarry Close, {city}.", p, "address", "5 Quarry Close", _said(rng), "profile"
    )
    phone = fact(
        f"{p}'s phone number is 07700 {rng.randrange(100000, 999999)}.",
        p,
        "phone",
        None,
        _said(rng),
        "profile",
    )
    existing = [address, phone, *filler(rng, p, rng.randrange(2), {city})]
    rng.shuffle(existing)
    turn = "Keep my address, that's fine for deliveries, but delete my phone number. Too many spam calls."
    return case("forget", p, when, [turn], existing, [], _deleted(existing, phone))


def conversion_kept_quiet(rng, p, when):
    faith = rng.choice(["Buddhism", "Catholicism", "Islam"])
    old = fact(f"{p} converted to {faith} in 2021.", p, "religion", faith, date(2021, 5, 1), "event")
    existing = [old, *filler(rng, p, 2, set())]
    rng.shuffle(existing)
    turns = ["My family doesn't know yet.", f"So please erase the note about {faith}, at least for now."]
    return case("forget", p, when, turns, existing, [], _deleted(existing, old))


def parking_ticket_questioned(rng, p, when):
    city = rng.choice(CITIES)
    old = fact(f"{p} got a parking ticket in {city}.", p, "received", "parking ticket", _said(rng), "event")
    existing = [*filler(rng, p, 1 + rng.randrange(2), {city}), old]
    rng.shuffle(existing)
    turns = [
        "Wait, why do you even know about that?",
        "Erase the parking ticket, please. Already paid, already forgotten.",
    ]
    return case("forget", p, when, turns, existing, [], _deleted(existing, old))


def blood_pressure_hindi(rng, p, when):
    reading = rng.choice(["150/95", "145/92", "160/100"])
    old = fact(
        f"{p}'s blood pressure was {reading} at the last check-up.", p, "blood_pressure", reading, _said(rng)
    )
    existing = [old, *filler(rng, p, rng.randrange(3), set())]
    rng.shuffle(existing)
    turn = "Yeh mat yaad rakhna — don't keep my blood pressure readings, the doctor has them anyway."
    return case("forget", p, when, [turn], existing, [], _deleted(existing, old))


def school_nickname(rng, p, when):
    nickname = rng.choice(["Noodle", "Beans", "Sparky", "Goose"])
    old = fact(f"{p}'s childhood nickname was '{nickname}'.", p, "nickname", nickname, _said(rng), "profile")
    existing = [*filler(rng, p, 2, set()), old]
    rng.shuffle(existing)
    turn = (
        f"Oh god. Forget '{nickname}'. Nobody has called me that since year six and nobody ever will again."
    )
    return case("forget", p, when, [turn], existing, [], _deleted(existing, old))


def weight_portuguese(rng, p, when):
    kilos = rng.choice([68, 82, 95])
    old = fact(f"{p}'s weight is {kilos} kg.", p, "weight", f"{kilos} kg", _said(rng), "profile")
    existing = [old, *filler(rng, p, 1 + rng.randrange(2), set())]
    rng.shuffle(existing)
    turn = "Apaga isso, por favor — remove what you stored about my weight. Não é da conta de ninguém."
    return case("forget", p, when, [turn], existing, [], _deleted(existing, old))


def late_dog_too_painful(rng, p, when):
    dog = rng.choice(["Bruno", "Lola", "Scout", "Maple"])
    old = fact(f"{p} has a dog named {dog}.", p, "has_pet", dog, _said(rng), "profile")
    existing = [*filler(rng, p, rng.randrange(3), {dog}), old]
    rng.shuffle(existing)
    turn = f"It's still too painful. Please don't remember {dog} anymore — I can't keep seeing that name come up."
    return case("forget", p, when, [turn], existing, [], _deleted(existing, old))


def partner_kept_out_of_notes(rng, p, when):
    partner, surname = rng.choice([("Ines", "Valcárcel"), ("Mara", "Oyelaran"), ("Juno", "Halvorsen")])
    old = fact(f"{p}'s partner is {partner} {surname}.", p, "partner", partner, _said(rng), "profile")
    existing = [old, *filler(rng, p, 2, set())]
    rng.shuffle(existing)
    turn = f"Could you erase my partner's name? {partner} is very private and would rather not be in anyone's notes."
    return case("forget", p, when, [turn], existing, [], _deleted(existing, old))


def surprise_party_hidden(rng, p, when):
    guest = rng.choice(MEN + WOMEN)
    old = fact(f"{p} is planning a surprise party for {guest}.", p, "plans_to", "surprise party", _said(rng))
    existing = [*filler(rng, p, 1 + rng.randrange(2), set()), old]
    rng.shuffle(existing)
    turns = [
        f"{guest} sometimes borrows my phone.",
        "Delete the surprise party plan, I'll keep it in my head instead.",
    ]
    return case("forget", p, when, turns, existing, [], _deleted(existing, old))


def sons_girlfriend(rng, p, when):
    son, girl = rng.choice([("Mateo", "Chloe"), ("Arjun", "Isla"), ("Finn", "Amira")])
    old = fact(f"{p}'s son {son} is dating {girl}.", p, "son_dating", girl, _said(rng))
    age = fact(f"{p}'s son {son} is 16.", p, "son_age", "16", _said(rng))
    existing = [old, age, *filler(rng, p, rng.randrange(2), set())]
    rng.shuffle(existing)
    turn = f"My son made me promise to ask: remove who {son} is dating. Teenagers!"
    return case("forget", p, when, [turn], existing, [], _deleted(existing, old))


def travel_dates_security(rng, p, when):
    city = rng.choice(CITIES)
    old = fact(
        f"{p} will be travelling to {city} for three weeks in August.", p, "travel_plan", city, _said(rng)
    )
    existing = [old, *filler(rng, p, 2, {city})]
    rng.shuffle(existing)
    turn = f"For security, wipe my {city} travel dates — I don't want it written anywhere that the house is empty."
    return case("forget", p, when, [turn], existing, [], _deleted(existing, old))


def wifi_password_shouted(rng, p, when):
    password = rng.choice(["sunflower-42", "Tr0mb0ne!", "kiwi_kiwi_77"])
    old = fact(f"{p}'s home wifi password is {password}.", p, "wifi_password", password, _said(rng))
    existing = [*filler(rng, p, rng.randrange(3), set()), old]
    rng.shuffle(existing)
    turn = "DELETE THE WIFI PASSWORD. NOW. why did I paste that"
    return case("forget", p, when, [turn], existing, [], _deleted(existing, old))


TEMPLATES = [
    hobby_forgotten,
    ex_after_breakup,
    diagnosis_kept_private,
    locker_code_overshared,
    salary_off_the_record,
    estranged_brother_only,
    both_addresses,
    tattoo_texting,
    date_of_birth_gdpr,
    workplace_feels_creepy,
    ex_husband_french,
    surgery_spanish,
    home_address_german,
    daughters_grades,
    debt_regretted,
    job_search_purged,
    friends_secret,
    two_medications,
    gym_schedule_terse,
    therapist_name_rambling,
    keep_one_drop_the_other,
    conversion_kept_quiet,
    parking_ticket_questioned,
    blood_pressure_hindi,
    school_nickname,
    weight_portuguese,
    late_dog_too_painful,
    partner_kept_out_of_notes,
    surprise_party_hidden,
    sons_girlfriend,
    travel_dates_security,
    wifi_password_shouted,
]

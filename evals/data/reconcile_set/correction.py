"""Correction: the speaker says a remembered fact was wrong all along (misheard, mistyped,
mixed up with someone else), so the careful answer is INVALIDATE of that memory with
correction = true, carrying the right fact. A few families also mention a new fact on the side,
which is an ADD. Each family is its own situation, domain and way of talking."""

from __future__ import annotations

from datetime import date

from evals.data.reconcile_set.kit import EMPLOYERS, SIBLINGS, case, day, fact, filler

RELATIVES = ["Agnes", "Bertrand", "Conchita", "Desmond", "Eulalia", "Fergus", "Gunhild", "Horacio"]
NAME_SPELLINGS = [("Jon", "Jean", "J-E-A-N, he's French"), ("Shawn", "Sean", "S-E-A-N, the Irish way")]
MEDICINES = [
    ("sertraline", "50 mg", "500 mg"),
    ("propranolol", "10 mg", "100 mg"),
    ("citalopram", "20 mg", "200 mg"),
]
CLUBS = [
    ("Real Madrid", "Atlético Madrid", "¡Qué va! Soy del Atleti"),
    ("Barça", "Espanyol", "¡Ni hablar! Soy perico"),
]


def _said(rng):
    return day(rng, date(2022, 6, 1), 500)


def _corrected(existing, old):
    return {"action": "INVALIDATE", "target": existing.index(old) + 1, "correction": True}


def sister_misspoken(rng, p, when):
    wrong, right = rng.sample(SIBLINGS, 2)
    old = fact(f"{p}'s sister is named {wrong}.", p, "sister", wrong, day(rng, date(2023, 1, 1)))
    existing = [*filler(rng, p, rng.randrange(3), {wrong, right}), old]
    rng.shuffle(existing)
    new = [fact(f"{p}'s sister is named {right}.", p, "sister", right, None)]
    turn = f"Sorry, I misspoke earlier: my sister is {right}, not {wrong}."
    return case("correction", p, when, [turn], existing, new, [_corrected(existing, old)])


def misheard_city(rng, p, when):
    wrong, right, state = rng.choice(
        [("Austin", "Boston", "Texas"), ("Dallas", "Dulles", "Texas"), ("Denver", "Dover", "Colorado")]
    )
    old = fact(f"{p} lives in {wrong}.", p, "lives_in", wrong, _said(rng), "profile")
    existing = [old, *filler(rng, p, 1 + rng.randrange(2), {wrong, right})]
    rng.shuffle(existing)
    turn = f"No no — {right}, not {wrong}. I've never even been to {state}, the line was just bad."
    new = [fact(f"{p} lives in {right}.", p, "lives_in", right, None, "profile")]
    return case("correction", p, when, [turn], existing, new, [_corrected(existing, old)])


def wrong_drug_allergy(rng, p, when):
    wrong, right = rng.choice([("penicillin", "sulfa drugs"), ("aspirin", "codeine"), ("latex", "iodine")])
    old = fact(f"{p} is allergic to {wrong}.", p, "allergic_to", wrong, _said(rng), "profile")
    existing = [*filler(rng, p, 2, set()), old]
    rng.shuffle(existing)
    turn = f"You've got that wrong, and it matters: it's {right} I react to. {wrong.capitalize()} is completely fine for me."
    new = [fact(f"{p} is allergic to {right}, not {wrong}.", p, "allergic_to", right, None, "profile")]
    return case("correction", p, when, [turn], existing, new, [_corrected(existing, old)])


def birthday_read_american_style(rng, p, when):
    day_no, month_no = rng.choice([(11, 7), (4, 9), (5, 12), (8, 4)])
    right = date(2000, month_no, day_no).strftime("%B ") + str(day_no)
    wrong = date(2000, day_no, month_no).strftime("%B ") + str(month_no)
    old = fact(f"{p}'s birthday is on {wrong}.", p, "birthday", wrong, _said(rng), "profile")
    existing = [old, *filler(rng, p, rng.randrange(3), set())]
    rng.shuffle(existing)
    turn = f"Ah, you read {day_no}/{month_no} the American way — my birthday's the {day_no}th of {right.split()[0]}, not {wrong}."
    new = [fact(f"{p}'s birthday is on {right}.", p, "birthday", right, None, "profile")]
    return case("correction", p, when, [turn], existing, new, [_corrected(existing, old)])


def never_worked_there(rng, p, when):
    wrong, right = rng.sample(EMPLOYERS, 2)
    old = fact(f"{p} works at {wrong}.", p, "works_at", wrong, _said(rng), "profile")
    existing = [*filler(rng, p, 1 + rng.randrange(2), set()), old]
    rng.shuffle(existing)
    turns = [
        "Hang on, let me look at what you've got on me.",
        f"Not {wrong}. {right}. Never worked at {wrong} in my life.",
    ]
    new = [fact(f"{p} works at {right}.", p, "works_at", right, None, "profile")]
    return case("correction", p, when, turns, existing, new, [_corrected(existing, old)])


def guinea_pig_not_a_dog(rng, p, when):
    name = rng.choice(["Pixel", "Nugget", "Waffles", "Pip"])
    old = fact(f"{p} has a dog named {name}.", p, "has_pet", name, _said(rng), "profile")
    existing = [old, *filler(rng, p, 2, {name})]
    rng.shuffle(existing)
    turn = f"lmao {name} is NOT a dog. guinea pig. tiny. squeaks. fits in one hand"
    new = [fact(f"{p} has a guinea pig named {name}.", p, "has_pet", name, None, "profile")]
    return case("correction", p, when, [turn], existing, new, [_corrected(existing, old)])


def nephew_in_the_photo(rng, p, when):
    old = fact(f"{p} has three children.", p, "children", "3", _said(rng), "profile")
    existing = [*filler(rng, p, rng.randrange(3), set()), old]
    rng.shuffle(existing)
    turn = "Just the two kids, actually — the third one in that beach photo was my nephew, not mine!"
    new = [fact(f"{p} has two children.", p, "children", "2", None, "profile")]
    return case("correction", p, when, [turn], existing, new, [_corrected(existing, old)])


def pharmacist_not_doctor(rng, p, when):
    old = fact(f"{p} is a doctor.", p, "job_title", "doctor", _said(rng), "profile")
    existing = [old, *filler(rng, p, 1 + rng.randrange(2), set())]
    rng.shuffle(existing)
    turn = "People always assume that because of the white coat, but I'm a pharmacist, not a doctor. Never went to med school."
    new = [fact(f"{p} is a pharmacist.", p, "job_title", "pharmacist", None, "profile")]
    return case("correction", p, when, [turn], existing, new, [_corrected(existing, old)])


def husband_name_spelled_out(rng, p, when):
    wrong, right, spelled = rng.choice(NAME_SPELLINGS)
    old = fact(f"{p}'s husband is named {wrong}.", p, "married_to", wrong, _said(rng), "profile")
    existing = [*filler(rng, p, 2, set()), old]
    rng.shuffle(existing)
    turn = f"It's {right} — {spelled}. Not {wrong}. He'd be horrified."
    new = [fact(f"{p}'s husband is named {right}.", p, "married_to", right, None, "profile")]
    return case("correction", p, when, [turn], existing, new, [_corrected(existing, old)])


def vegetarian_not_vegan(rng, p, when):
    old = fact(f"{p} is vegan.", p, "diet", "vegan", _said(rng), "profile")
    friend = rng.choice(RELATIVES)
    theirs = fact(f"{friend} is vegan.", friend, "diet", "vegan", _said(rng), "profile")
    existing = [old, theirs, *filler(rng, p, rng.randrange(2), set())]
    rng.shuffle(existing)
    turn = f"You have me down as vegan? That's {friend}. I eat cheese and eggs — vegetarian, never vegan."
    new = [fact(f"{p} is vegetarian and eats dairy and eggs.", p, "diet", "vegetarian", None, "profile")]
    return case("correction", p, when, [turn], existing, new, [_corrected(existing, old)])


def email_letter_missing(rng, p, when):
    user = p.lower()
    wrong, right = f"{user}.conolly@mailbox.example", f"{user}.connolly@mailbox.example"
    old = fact(f"{p}'s email address is {wrong}.", p, "email", wrong, _said(rng), "profile")
    existing = [old, *filler(rng, p, 2, set())]
    rng.shuffle(existing)
    turn = f"Sorry for my english — the email I gave before is not correct. Correct one is {right}, with two 'n'."
    new = [fact(f"{p}'s email address is {right}.", p, "email", right, None, "profile")]
    return case("correction", p, when, [turn], existing, new, [_corrected(existing, old)])


def age_digits_swapped(rng, p, when):
    right = rng.choice([34, 26, 52, 19])
    wrong = int(str(right)[::-1])
    old = fact(f"{p} is {wrong} years old.", p, "age", str(wrong), _said(rng), "profile")
    existing = [*filler(rng, p, 1 + rng.randrange(2), set()), old]
    rng.shuffle(existing)
    turn = f"Typo! I'm {right}, not {wrong} — fat fingers swapped the digits. I'm not THAT old."
    new = [fact(f"{p} is {right} years old.", p, "age", str(right), None, "profile")]
    return case("correction", p, when, [turn], existing, new, [_corrected(existing, old)])


def moving_year_off_by_two(rng, p, when):
    city = rng.choice(["Denver", "Lisbon", "Seoul"])
    right = rng.choice([2015, 2017, 2019])
    wrong = right + 2
    old = fact(f"{p} moved to {city} in {wrong}.", p, "moved_to", city, date(wrong, 1, 1), "event")
    existing = [old, *filler(rng, p, rng.randrange(3), {city})]
    rng.shuffle(existing)
    turn = f"Small fix: it was {right} when I moved to {city}, not {wrong}. I remember because it was the year of the floods."
    new = [fact(f"{p} moved to {city} in {right}.", p, "moved_to", city, date(right, 1, 1), "event")]
    return case("correction", p, when, [turn], existing, new, [_corrected(existing, old)])


def father_never_flew(rng, p, when):
    father = rng.choice(["Desmond", "Bertrand", "Horacio", "Fergus"])
    old = fact(
        f"{father}, {p}'s father, was an airline pilot.", father, "job", "pilot", _said(rng), "profile"
    )
    existing = [*filler(rng, p, 2, set()), old]
    rng.shuffle(existing)
    turns = [
        "Dad's retirement party was lovely.",
        f"Oh, and he never flew planes — {father} was an air-traffic controller. Common mix-up.",
    ]
    new = [
        fact(
            f"{father}, {p}'s father, was an air-traffic controller.",
            father,
            "job",
            "air-traffic controller",
            None,
            "profile",
        )
    ]
    return case("correction", p, when, turns, existing, new, [_corrected(existing, old)])


def wrong_club_spanish(rng, p, when):
    wrong, right, shout = rng.choice(CLUBS)
    old = fact(f"{p} supports {wrong}.", p, "supports", wrong, _said(rng), "preference")
    existing = [old, *filler(rng, p, 1 + rng.randrange(2), set())]
    rng.shuffle(existing)
    turn = f"{shout}, never {wrong}. Whoever told you that wants to start a fight."
    new = [fact(f"{p} supports {right}.", p, "supports", right, None, "preference")]
    return case("correction", p, when, [turn], existing, new, [_corrected(existing, old)])


def crochet_not_knitting(rng, p, when):
    old = fact(f"{p} knits.", p, "crafts", "knitting", _said(rng), "preference")
    existing = [*filler(rng, p, rng.randrange(3), {"knitting"}), old]
    rng.shuffle(existing)
    turn = "I think you've mixed me up with someone — I don't knit, I crochet. One hook, not two needles!"
    new = [fact(f"{p} crochets.", p, "crafts", "crochet", None, "preference")]
    return case("correction", p, when, [turn], existing, new, [_corrected(existing, old)])


def phone_last_digits_swapped(rng, p, when):
    head, tail = f"+1 415 555 {rng.randrange(10, 99)}", rng.choice(["47", "16", "38"])
    wrong, right = head + tail, head + tail[::-1]
    old = fact(f"{p}'s phone number is {wrong}.", p, "phone", wrong, _said(rng), "profile")
    existing = [old, *filler(rng, p, 2, set())]
    rng.shuffle(existing)
    turn = f"one digit off — it ends in {right[-4:]}, not {wrong[-4:]}. full thing: {right}"
    new = [fact(f"{p}'s phone number is {right}.", p, "phone", right, None, "profile")]
    return case("correction", p, when, [turn], existing, new, [_corrected(existing, old)])


def the_small_mazda(rng, p, when):
    wrong, right = rng.choice(
        [("Mazda 6", "Mazda 3"), ("BMW 5 Series", "BMW 3 Series"), ("Audi A6", "Audi A4")]
    )
    old = fact(f"{p} drives a {wrong}.", p, "car", wrong, _said(rng), "profile")
    existing = [*filler(rng, p, 1 + rng.randrange(2), set()), old]
    rng.shuffle(existing)
    turn = (
        f"It's a {right}, not a {wrong} — the smaller one. I couldn't afford the big one even if I wanted it."
    )
    new = [fact(f"{p} drives a {right}.", p, "car", right, None, "profile")]
    return case("correction", p, when, [turn], existing, new, [_corrected(existing, old)])


def dose_off_by_ten(rng, p, when):
    drug, right, wrong = rng.choice(MEDICINES)
    old = fact(f"{p} takes {wrong} of {drug} daily.", p, "takes_medication", drug, _said(rng))
    existing = [old, *filler(rng, p, rng.randrange(3), set())]
    rng.shuffle(existing)
    turn = f"Please fix this one: it's {right} of {drug}, not {wrong}. Big difference!"
    new = [fact(f"{p} takes {right} of {drug} daily.", p, "takes_medication", drug, None)]
    return case("correction", p, when, [turn], existing, new, [_corrected(existing, old)])


def australian_not_austrian(rng, p, when):
    old = fact(f"{p} is Austrian.", p, "nationality", "Austrian", _said(rng), "profile")
    existing = [*filler(rng, p, 2, set()), old]
    rng.shuffle(existing)
    turn = "Australian, mate — not Austrian. No kangaroos in Vienna last time I checked."
    new = [fact(f"{p} is Australian.", p, "nationality", "Australian", None, "profile")]
    return case("correction", p, when, [turn], existing, new, [_corrected(existing, old)])


def not_that_oxford(rng, p, when):
    wrong, right = rng.choice(
        [
            ("Oxford University", "Oxford Brookes University"),
            ("Cambridge University", "Anglia Ruskin University"),
        ]
    )
    old = fact(f"{p} graduated from {wrong}.", p, "graduated_from", wrong, _said(rng), "profile")
    existing = [old, *filler(rng, p, 1 + rng.randrange(2), set())]
    rng.shuffle(existing)
    turn = f"Ha, not *that* one — {right}. Same city, very different tuition fees."
    new = [fact(f"{p} graduated from {right}.", p, "graduated_from", right, None, "profile")]
    return case("correction", p, when, [turn], existing, new, [_corrected(existing, old)])


def anniversary_year(rng, p, when):
    right = rng.choice([2012, 2014, 2016])
    wrong = right - 2
    old = fact(f"{p} got married in {wrong}.", p, "married_on", str(wrong), date(wrong, 6, 1), "event")
    existing = [*filler(rng, p, rng.randrange(3), set()), old]
    rng.shuffle(existing)
    turns = [
        "Our anniversary is coming up!",
        f"We married in {right} — not {wrong} like you have it. My wife would kill me.",
    ]
    new = [fact(f"{p} got married in {right}.", p, "married_on", str(right), date(right, 6, 1), "event")]
    return case("correction", p, when, turns, existing, new, [_corrected(existing, old)])


def danish_not_dutch(rng, p, when):
    wrong, right, hint = rng.choice(
        [
            ("Dutch", "Danish", "Copenhagen, not Amsterdam"),
            ("Swedish", "Swiss German", "Zürich, not Stockholm"),
        ]
    )
    old = fact(f"{p} speaks {wrong}.", p, "speaks", wrong, _said(rng), "profile")
    existing = [old, *filler(rng, p, 2, set())]
    rng.shuffle(existing)
    turn = f"{right}! Not {wrong}. {hint}. Easy to mix up, I know."
    new = [fact(f"{p} speaks {right}.", p, "speaks", right, None, "profile")]
    return case("correction", p, when, [turn], existing, new, [_corrected(existing, old)])


def renting_not_owning(rng, p, when):
    old = fact(f"{p} owns their apartment.", p, "home_tenure", "owner", _said(rng), "profile")
    existing = [*filler(rng, p, 1 + rng.randrange(2), set()), old]
    rng.shuffle(existing)
    turn = "I wish I owned it! No — renting, like everyone else my age. The landlord owns it."
    new = [fact(f"{p} rents their apartment.", p, "home_tenure", "renter", None, "profile")]
    return case("correction", p, when, [turn], existing, new, [_corrected(existing, old)])


def alex_is_a_sister(rng, p, when):
    name, full = rng.choice([("Alex", "Alexandra"), ("Sam", "Samantha"), ("Charlie", "Charlotte")])
    old = fact(f"{p} has a brother named {name}.", p, "sibling", name, _said(rng), "profile")
    existing = [old, *filler(rng, p, rng.randrange(3), set())]
    rng.shuffle(existing)
    turn = f"{name} is my sister, not my brother — it's short for {full}."
    new = [fact(f"{p} has a sister named {name} ({full}).", p, "sibling", name, None, "profile")]
    return case("correction", p, when, [turn], existing, new, [_corrected(existing, old)])


def yoga_day_terse(rng, p, when):
    wrong, right, short = rng.choice([("Wednesdays", "thursdays", "weds"), ("Mondays", "tuesdays", "mon")])
    old = fact(f"{p}'s yoga class is on {wrong} at 6 pm.", p, "class_schedule", wrong, _said(rng))
    existing = [*filler(rng, p, 2, set()), old]
    rng.shuffle(existing)
    turn = f"{right}. not {short}. yoga @ 6."
    new = [
        fact(
            f"{p}'s yoga class is on {right.capitalize()} at 6 pm.",
            p,
            "class_schedule",
            right.capitalize(),
            None,
        )
    ]
    return case("correction", p, when, [turn], existing, new, [_corrected(existing, old)])


def hanukkah_is_the_partners(rng, p, when):
    partner = rng.choice(["Miriam", "Ezra", "Talia", "Noam"])
    old = fact(f"{p} celebrates Hanukkah.", p, "celebrates", "Hanukkah", _said(rng))
    existing = [old, *filler(rng, p, 1 + rng.randrange(2), set())]
    rng.shuffle(existing)
    turn = f"Oh, Hanukkah is {partner}'s side of the family. My lot have always done Christmas."
    new = [
        fact(f"{p} celebrates Christmas.", p, "celebrates", "Christmas", None),
        fact(f"{partner}'s family celebrates Hanukkah.", partner, "celebrates", "Hanukkah", None),
    ]
    return case("correction", p, when, [turn], existing, new, [_corrected(existing, old), {"action": "ADD"}])


def blood_type_donor_card(rng, p, when):
    wrong, right = rng.choice(
        [("A positive", "O positive"), ("B negative", "AB negative"), ("O negative", "A negative")]
    )
    old = fact(f"{p}'s blood type is {wrong}.", p, "blood_type", wrong, _said(rng), "profile")
    existing = [*filler(rng, p, rng.randrange(3), set()), old]
    rng.shuffle(existing)
    turn = f"Checked my donor card just now: {right}. So whoever wrote {wrong} was wrong."
    new = [fact(f"{p}'s blood type is {right}.", p, "blood_type", right, None, "profile")]
    return case("correction", p, when, [turn], existing, new, [_corrected(existing, old)])


def viola_not_violin(rng, p, when):
    old = fact(f"{p} plays the violin in an amateur orchestra.", p, "plays", "violin", _said(rng))
    existing = [old, *filler(rng, p, 2, {"plays"})]
    rng.shuffle(existing)
    turn = "Viola, not violin! Slightly bigger, lower, and yes, we violists hear that mistake constantly."
    new = [fact(f"{p} plays the viola in an amateur orchestra.", p, "plays", "viola", None)]
    return case("correction", p, when, [turn], existing, new, [_corrected(existing, old)])


def born_elsewhere_hindi(rng, p, when):
    wrong, right = rng.choice([("Mumbai", "Pune"), ("Delhi", "Agra"), ("Chennai", "Madurai")])
    old = fact(f"{p} was born in {wrong}.", p, "born_in", wrong, _said(rng), "profile")
    existing = [old, *filler(rng, p, rng.randrange(3), set())]
    rng.shuffle(existing)
    turn = f"Galat hai! {right} meri janmabhoomi hai, {wrong} nahi. We only moved to {wrong} when I was ten."
    new = [fact(f"{p} was born in {right}.", p, "born_in", right, None, "profile")]
    return case("correction", p, when, [turn], existing, new, [_corrected(existing, old)])


def manager_mixed_up_with_it_guy(rng, p, when):
    wrong, right = rng.choice([("Kevin", "Keith"), ("Mark", "Mike"), ("Anna", "Hannah")])
    old = fact(f"{p}'s manager is {wrong}.", p, "manager", wrong, _said(rng), "profile")
    existing = [*filler(rng, p, 1 + rng.randrange(2), set()), old]
    rng.shuffle(existing)
    turns = [
        "Quick one about work.",
        f"My manager's {right}. {wrong}'s the one in IT who fixes the printers.",
    ]
    new = [
        fact(f"{p}'s manager is {right}.", p, "manager", right, None, "profile"),
        fact(f"{wrong} works in IT at {p}'s workplace.", wrong, "works_in", "IT", None, "profile"),
    ]
    return case("correction", p, when, turns, existing, new, [_corrected(existing, old), {"action": "ADD"}])


def time_zone_wrong(rng, p, when):
    wrong, right, city = rng.choice([("Pacific", "Mountain", "Denver"), ("Eastern", "Central", "Chicago")])
    old = fact(f"{p} is in the {wrong} time zone.", p, "time_zone", wrong, _said(rng), "profile")
    existing = [old, *filler(rng, p, 2, {city})]
    rng.shuffle(existing)
    turn = (
        f"Schedule my calls on {right} time please, not {wrong} — I'm in {city}, it's been {right} all along."
    )
    new = [fact(f"{p} is in the {right} time zone.", p, "time_zone", right, None, "profile")]
    return case("correction", p, when, [turn], existing, new, [_corrected(existing, old)])


TEMPLATES = [
    sister_misspoken,
    misheard_city,
    wrong_drug_allergy,
    birthday_read_american_style,
    never_worked_there,
    guinea_pig_not_a_dog,
    nephew_in_the_photo,
    pharmacist_not_doctor,
    husband_name_spelled_out,
    vegetarian_not_vegan,
    email_letter_missing,
    age_digits_swapped,
    moving_year_off_by_two,
    father_never_flew,
    wrong_club_spanish,
    crochet_not_knitting,
    phone_last_digits_swapped,
    the_small_mazda,
    dose_off_by_ten,
    australian_not_austrian,
    not_that_oxford,
    anniversary_year,
    danish_not_dutch,
    renting_not_owning,
    alex_is_a_sister,
    yoga_day_terse,
    hanukkah_is_the_partners,
    blood_type_donor_card,
    viola_not_violin,
    born_elsewhere_hindi,
    manager_mixed_up_with_it_guy,
    time_zone_wrong,
]

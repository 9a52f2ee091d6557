"""Refinement: the turns add detail to a memory that is still true (the same fact, said more
precisely), so the careful answer is UPDATE of that memory with the merged sentence. Each family
is its own situation, domain and way of talking."""

from __future__ import annotations

from datetime import date

from evals.data.reconcile_set.kit import CITIES, EMPLOYERS, FOODS, HOBBIES, case, day, fact, filler

FRIENDS = ["Ingrid", "Kofi", "Benedikt", "Ayesha", "Mateus", "Hana", "Callum", "Zainab", "Emeka", "Ilse"]
NEIGHBOURHOODS = [
    ("Lisbon", "Alfama"),
    ("Chicago", "Logan Square"),
    ("Boston", "Jamaica Plain"),
    ("Madrid", "Lavapiés"),
    ("Toronto", "Leslieville"),
    ("Osaka", "Nakazakicho"),
]
BREEDS = ["beagle", "border collie", "greyhound", "dachshund", "Labrador"]
SCHOOLS = ["Trinity College Dublin", "the University of Porto", "McGill", "the University of Edinburgh"]
SCI_FI = [
    ("Ursula K. Le Guin", "Ted Chiang"),
    ("Octavia Butler", "N. K. Jemisin"),
    ("Stanisław Lem", "Liu Cixin"),
]
VEG = ["tomatoes", "courgettes", "runner beans", "chillies", "kale", "strawberries"]


def _since(rng):
    return day(rng, date(2022, 3, 1), 500)


def food_in_detail(rng, p, when):
    general, specific = rng.choice(FOODS)
    old = fact(f"{p} likes {general}.", p, "likes", general, day(rng, date(2023, 1, 1)), "preference")
    existing = [*filler(rng, p, rng.randrange(3), {general}), old]
    rng.shuffle(existing)
    new = [fact(f"{p} likes {specific}.", p, "likes", general, when, "preference")]
    turn = f"When it comes to {general}, I mean {specific}."
    return case(
        "refinement",
        p,
        when,
        [turn],
        existing,
        new,
        [{"action": "UPDATE", "target": existing.index(old) + 1}],
    )


def yoga_style_and_days(rng, p, when):
    style, days = rng.choice([("Ashtanga", "Mon/Wed/Fri"), ("Iyengar", "Tue/Thu"), ("yin", "Sun")])
    old = fact(f"{p} does yoga.", p, "practises", "yoga", _since(rng))
    existing = [old, *filler(rng, p, 1 + rng.randrange(2), set())]
    rng.shuffle(existing)
    turn = f"It's {style} specifically — {days}, before work, 6:30 class."
    new = [
        fact(
            f"{p} practises {style} yoga in a 6:30 am class before work ({days}).",
            p,
            "practises",
            "yoga",
            when,
        )
    ]
    ops = [{"action": "UPDATE", "target": existing.index(old) + 1}]
    return case("refinement", p, when, [turn], existing, new, ops)


def dog_breed_and_age(rng, p, when):
    name, breed, age = (
        rng.choice(["Pixel", "Biscuit", "Juno", "Mango"]),
        rng.choice(BREEDS),
        rng.choice([2, 3, 5]),
    )
    old = fact(f"{p} has a dog named {name}.", p, "has_pet", name, _since(rng), "profile")
    friend = rng.choice(FRIENDS)
    theirs = fact(f"{friend} has a dog named Rufus.", friend, "has_pet", "Rufus", _since(rng), "profile")
    existing = [old, theirs, *filler(rng, p, rng.randrange(2), {name})]
    rng.shuffle(existing)
    turns = [f"{name}'s a {breed}, by the way.", f"{age} years old and still acts like a puppy."]
    new = [fact(f"{p} has a {age}-year-old {breed} named {name}.", p, "has_pet", name, when, "profile")]
    ops = [{"action": "UPDATE", "target": existing.index(old) + 1}]
    return case("refinement", p, when, turns, existing, new, ops)


def nurse_unit_formal(rng, p, when):
    unit = rng.choice(["paediatric intensive care", "emergency department", "oncology day unit"])
    old = fact(f"{p} is a nurse.", p, "job_title", "nurse", _since(rng), "profile")
    existing = [*filler(rng, p, 2, set()), old]
    rng.shuffle(existing)
    turn = f"To be precise, I am a registered nurse in the {unit}, not a general ward nurse."
    new = [fact(f"{p} is a registered nurse in the {unit}.", p, "job_title", "nurse", when, "profile")]
    ops = [{"action": "UPDATE", "target": existing.index(old) + 1}]
    return case("refinement", p, when, [turn], existing, new, ops)


def allergy_severity_epipen(rng, p, when):
    food = rng.choice(["shellfish", "sesame", "tree nuts"])
    old = fact(f"{p} is allergic to {food}.", p, "allergic_to", food, _since(rng), "profile")
    existing = [old, *filler(rng, p, rng.randrange(3), {food})]
    rng.shuffle(existing)
    turn = f"it's serious btw — anaphylaxis level. EpiPen lives in my bag, {food} = hospital"
    new = [
        fact(
            f"{p} has a severe, anaphylactic {food} allergy and carries an EpiPen.",
            p,
            "allergic_to",
            food,
            when,
            "profile",
        )
    ]
    ops = [{"action": "UPDATE", "target": existing.index(old) + 1}]
    return case("refinement", p, when, [turn], existing, new, ops)


def law_degree_non_native(rng, p, when):
    school, year = rng.choice(SCHOOLS), rng.choice([2009, 2014, 2017])
    old = fact(f"{p} studied law.", p, "studied", "law", _since(rng), "profile")
    existing = [*filler(rng, p, 1 + rng.randrange(2), set()), old]
    rng.shuffle(existing)
    turn = f"I have made my studies of law in {school}, finishing them in {year}."
    new = [fact(f"{p} studied law at {school}, graduating in {year}.", p, "studied", "law", when, "profile")]
    ops = [{"action": "UPDATE", "target": existing.index(old) + 1}]
    return case("refinement", p, when, [turn], existing, new, ops)


def car_trim_and_colour(rng, p, when):
    colour, year = rng.choice(["silver", "dark blue", "white"]), rng.choice([2016, 2019, 2021])
    old = fact(f"{p} drives a Toyota.", p, "car", "Toyota", _since(rng), "profile")
    existing = [old, *filler(rng, p, 2, set())]
    rng.shuffle(existing)
    turns = ["Parking at the station is a nightmare.", f"The Toyota's a Corolla hybrid — {year}, {colour}."]
    new = [fact(f"{p} drives a {colour} {year} Toyota Corolla hybrid.", p, "car", "Toyota", when, "profile")]
    ops = [{"action": "UPDATE", "target": existing.index(old) + 1}]
    return case("refinement", p, when, turns, existing, new, ops)


def neighbourhood_named(rng, p, when):
    city, area = rng.choice(NEIGHBOURHOODS)
    old = fact(f"{p} lives in {city}.", p, "lives_in", city, _since(rng), "profile")
    friend = rng.choice(FRIENDS)
    other = rng.choice([c for c in CITIES if c != city])
    existing = [old, fact(f"{friend} lives in {other}.", friend, "lives_in", other, _since(rng), "profile")]
    rng.shuffle(existing)
    turn = f"We're in {area}, if you know {city} at all — noisy on weekends, but we love it."
    new = [fact(f"{p} lives in the {area} neighbourhood of {city}.", p, "lives_in", city, when, "profile")]
    ops = [{"action": "UPDATE", "target": existing.index(old) + 1}]
    return case("refinement", p, when, [turn], existing, new, ops)


def younger_sister_gets_a_name(rng, p, when):
    sister, age = rng.choice(["Lena", "Marta", "Noa", "Keira"]), rng.choice([16, 19, 22])
    old = fact(f"{p} has a younger sister.", p, "sister", None, _since(rng), "profile")
    existing = [*filler(rng, p, rng.randrange(3), set()), old]
    rng.shuffle(existing)
    turn = f"{sister}, my kid sister, is {age} now — taller than me, which is annoying."
    new = [
        fact(f"{p} has a younger sister named {sister}, who is {age}.", p, "sister", sister, when, "profile")
    ]
    ops = [{"action": "UPDATE", "target": existing.index(old) + 1}]
    return case("refinement", p, when, [turn], existing, new, ops)


def long_run_route(rng, p, when):
    km, place = rng.choice([10, 15, 21]), rng.choice(["the river path", "the canal towpath", "the seafront"])
    old = fact(f"{p} goes running regularly.", p, "exercise", "running", _since(rng))
    existing = [old, *filler(rng, p, 2, set())]
    rng.shuffle(existing)
    turn = f"sunday long run = {km}k along {place} 🏃 rain or shine"
    new = [fact(f"{p} runs {km} km along {place} every Sunday.", p, "exercise", "running", when)]
    ops = [{"action": "UPDATE", "target": existing.index(old) + 1}]
    return case("refinement", p, when, [turn], existing, new, ops)


def jazz_era_narrowed(rng, p, when):
    era, names = rng.choice([("1950s bebop", "Bird, Dizzy"), ("1960s modal jazz", "Coltrane, Miles")])
    old = fact(f"{p} likes jazz.", p, "likes", "jazz", _since(rng), "preference")
    existing = [*filler(rng, p, 2, {"jazz"}), old]
    rng.shuffle(existing)
    turn = f"When I say jazz I really mean the {era} stuff — {names}, that crowd. Smooth jazz can stay away."
    new = [fact(f"{p} likes jazz, mainly {era} ({names}).", p, "likes", "jazz", when, "preference")]
    ops = [{"action": "UPDATE", "target": existing.index(old) + 1}]
    return case("refinement", p, when, [turn], existing, new, ops)


def japanese_level_and_tutor(rng, p, when):
    tutor = rng.choice(["Sato-sensei", "Yumi", "Kenta"])
    old = fact(f"{p} is learning Japanese.", p, "learning", "Japanese", _since(rng))
    existing = [old, *filler(rng, p, rng.randrange(3), set())]
    rng.shuffle(existing)
    turns = [
        "Nihongo no benkyou, ganbatte imasu!",
        f"I'm around intermediate now — basic kanji, and I chat with my tutor {tutor} twice a week.",
    ]
    new = [
        fact(
            f"{p} is learning Japanese at an intermediate level, with tutor {tutor} twice a week.",
            p,
            "learning",
            "Japanese",
            when,
        )
    ]
    ops = [{"action": "UPDATE", "target": existing.index(old) + 1}]
    return case("refinement", p, when, turns, existing, new, ops)


def gluten_free_for_coeliac(rng, p, when):
    age = rng.choice(["eight", "twelve", "twenty"])
    old = fact(f"{p} eats gluten-free.", p, "diet", "gluten-free", _since(rng), "profile")
    existing = [*filler(rng, p, 1 + rng.randrange(2), set()), old]
    rng.shuffle(existing)
    turn = f"Not a fad thing! Coeliac, diagnosed at {age}. Even crumbs in the toaster get me."
    new = [
        fact(
            f"{p} eats strictly gluten-free because of coeliac disease.",
            p,
            "diet",
            "gluten-free",
            when,
            "profile",
        )
    ]
    ops = [{"action": "UPDATE", "target": existing.index(old) + 1}]
    return case("refinement", p, when, [turn], existing, new, ops)


def shelter_shift_details(rng, p, when):
    shelter, night = rng.choice(["Eastside", "Riverside", "Hillcrest"]), rng.choice(["Tuesday", "Thursday"])
    old = fact(f"{p} volunteers at an animal shelter.", p, "volunteers_at", "animal shelter", _since(rng))
    existing = [old, *filler(rng, p, 2, set())]
    rng.shuffle(existing)
    turn = (
        f"At the shelter I mostly walk the dogs. {night} evenings. It's the {shelter} one, off the ring road."
    )
    new = [
        fact(
            f"{p} walks dogs at the {shelter} animal shelter on {night} evenings.",
            p,
            "volunteers_at",
            "animal shelter",
            when,
        )
    ]
    ops = [{"action": "UPDATE", "target": existing.index(old) + 1}]
    return case("refinement", p, when, [turn], existing, new, ops)


def vegetable_patch_rambling(rng, p, when):
    first, second, third = rng.sample(VEG, 3)
    old = fact(f"{p} has a vegetable garden.", p, "has", "vegetable garden", _since(rng))
    existing = [*filler(rng, p, rng.randrange(3), set()), old]
    rng.shuffle(existing)
    turn = (
        f"So the veg patch behind the house — I keep meaning to tell you — it's mostly {first}, "
        f"a couple of rows of {second}, and {third} along the fence, which the slugs love more than I do."
    )
    new = [
        fact(
            f"{p} grows {first}, {second} and {third} in a vegetable garden behind the house.",
            p,
            "has",
            "vegetable garden",
            when,
        )
    ]
    ops = [{"action": "UPDATE", "target": existing.index(old) + 1}]
    return case("refinement", p, when, [turn], existing, new, ops)


def son_age_given(rng, p, when):
    son, age = rng.choice(["Theo", "Rafael", "Aarav", "Oskar"]), rng.choice([6, 8, 11])
    old = fact(f"{p} has a son named {son}.", p, "son", son, _since(rng), "profile")
    existing = [old, *filler(rng, p, 1, set())]
    rng.shuffle(existing)
    turns = [f"Parents' evening for {son} tonight.", f"He's {age}, can you believe it."]
    new = [fact(f"{p} has a son named {son}, who is {age} years old.", p, "son", son, when, "profile")]
    ops = [{"action": "UPDATE", "target": existing.index(old) + 1}]
    return case("refinement", p, when, turns, existing, new, ops)


def japan_trip_itinerary(rng, p, when):
    month = rng.choice(["April", "November"])
    old = fact(f"{p} plans to visit Japan next year.", p, "plans_to", "visit Japan", _since(rng))
    existing = [*filler(rng, p, 2, {"Osaka"}), old]
    rng.shuffle(existing)
    turn = f"Japan plan update: Kyoto + Osaka, {month}, ten days, flights not booked yet."
    new = [
        fact(
            f"{p} plans a ten-day trip to Kyoto and Osaka in Japan in {month}.",
            p,
            "plans_to",
            "visit Japan",
            when,
        )
    ]
    ops = [{"action": "UPDATE", "target": existing.index(old) + 1}]
    return case("refinement", p, when, [turn], existing, new, ops)


def metformin_dose_clinical(rng, p, when):
    dose = rng.choice(["500 mg", "850 mg"])
    old = fact(f"{p} takes metformin.", p, "takes_medication", "metformin", _since(rng))
    existing = [old, *filler(rng, p, rng.randrange(3), set())]
    rng.shuffle(existing)
    turn = f"Metformin {dose.replace(' ', '')} BID with meals."
    new = [
        fact(
            f"{p} takes {dose} of metformin twice a day with meals.", p, "takes_medication", "metformin", when
        )
    ]
    ops = [{"action": "UPDATE", "target": existing.index(old) + 1}]
    return case("refinement", p, when, [turn], existing, new, ops)


def sci_fi_authors_french(rng, p, when):
    first, second = rng.choice(SCI_FI)
    old = fact(
        f"{p} enjoys reading science fiction.", p, "enjoys", "science fiction", _since(rng), "preference"
    )
    existing = [*filler(rng, p, 1 + rng.randrange(2), set()), old]
    rng.shuffle(existing)
    turn = f"La science-fiction, oui, mais surtout {first} et {second} — their short stories most of all."
    new = [
        fact(
            f"{p} enjoys science fiction, especially the short stories of {first} and {second}.",
            p,
            "enjoys",
            "science fiction",
            when,
            "preference",
        )
    ]
    ops = [{"action": "UPDATE", "target": existing.index(old) + 1}]
    return case("refinement", p, when, [turn], existing, new, ops)


def band_role_bassist(rng, p, when):
    band = rng.choice(["The Late Shift", "Velvet Mondays", "Second Breakfast"])
    old = fact(f"{p} plays guitar in a band.", p, "plays_in", "band", _since(rng))
    existing = [old, *filler(rng, p, 2, {"plays"})]
    rng.shuffle(existing)
    turn = f"Technically I'm the bassist, not guitar guitar. Band's called {band}, we mostly do covers."
    new = [fact(f"{p} plays bass guitar in a covers band called {band}.", p, "plays_in", "band", when)]
    ops = [{"action": "UPDATE", "target": existing.index(old) + 1}]
    return case("refinement", p, when, [turn], existing, new, ops)


def asthma_trigger_non_native(rng, p, when):
    old = fact(f"{p} has asthma.", p, "health_condition", "asthma", _since(rng), "profile")
    existing = [*filler(rng, p, rng.randrange(3), set()), old]
    rng.shuffle(existing)
    turn = "My asthma is not so strong, only when the air is very cold I need to use the spray."
    new = [
        fact(
            f"{p} has mild asthma, triggered by cold air, and uses an inhaler.",
            p,
            "health_condition",
            "asthma",
            when,
            "profile",
        )
    ]
    ops = [{"action": "UPDATE", "target": existing.index(old) + 1}]
    return case("refinement", p, when, [turn], existing, new, ops)


def goalkeeper_portuguese(rng, p, when):
    day_name = rng.choice(["Saturday", "Sunday"])
    old = fact(f"{p} plays football on weekends.", p, "sport", "football", _since(rng))
    existing = [old, *filler(rng, p, 1 + rng.randrange(2), {"plays"})]
    rng.shuffle(existing)
    turn = f"Sou goleiro! In goal for a five-a-side league, {day_name} mornings."
    new = [
        fact(
            f"{p} plays in goal for a five-a-side football league on {day_name} mornings.",
            p,
            "sport",
            "football",
            when,
        )
    ]
    ops = [{"action": "UPDATE", "target": existing.index(old) + 1}]
    return case("refinement", p, when, [turn], existing, new, ops)


def solstice_birthday(rng, p, when):
    month, nth, hint = rng.choice([("June", "21st", "Solstice baby"), ("December", "25th", "Christmas baby")])
    old = fact(f"{p}'s birthday is in {month}.", p, "birthday", month, _since(rng), "profile")
    existing = [*filler(rng, p, 2, set()), old]
    rng.shuffle(existing)
    turn = f"{hint} — the {nth} exactly, so my party always clashes with something."
    new = [
        fact(
            f"{p}'s birthday is on {month} {nth[:-2]}.", p, "birthday", f"{month} {nth[:-2]}", when, "profile"
        )
    ]
    ops = [{"action": "UPDATE", "target": existing.index(old) + 1}]
    return case("refinement", p, when, [turn], existing, new, ops)


def two_rescue_cats_named(rng, p, when):
    first, second = rng.sample(["Mochi", "Tofu", "Pesto", "Nori", "Ziggy"], 2)
    old = fact(f"{p} has two cats.", p, "has_pet", "cats", _since(rng), "profile")
    existing = [old, *filler(rng, p, rng.randrange(3), set())]
    rng.shuffle(existing)
    turns = ["the cats say hi 🐈🐈", f"{first} and {second}, both rescues from the shelter"]
    new = [fact(f"{p} has two rescue cats, {first} and {second}.", p, "has_pet", "cats", when, "profile")]
    ops = [{"action": "UPDATE", "target": existing.index(old) + 1}]
    return case("refinement", p, when, turns, existing, new, ops)


def christmas_at_the_farm(rng, p, when):
    region = rng.choice(["Galicia", "Normandy", "Vermont", "the Black Forest"])
    old = fact(f"{p} spends Christmas with family.", p, "celebrates", "Christmas", _since(rng))
    existing = [*filler(rng, p, 1 + rng.randrange(2), set()), old]
    rng.shuffle(existing)
    turn = f"It's always at my grandparents' farm in {region}, all nineteen of us, snow or no snow."
    new = [
        fact(
            f"{p} spends Christmas with family at the grandparents' farm in {region}.",
            p,
            "celebrates",
            "Christmas",
            when,
        )
    ]
    ops = [{"action": "UPDATE", "target": existing.index(old) + 1}]
    return case("refinement", p, when, [turn], existing, new, ops)


def pension_percentage(rng, p, when):
    share = rng.choice([5, 10, 15])
    old = fact(f"{p} is saving for retirement.", p, "saving_for", "retirement", _since(rng))
    existing = [old, *filler(rng, p, 2, set())]
    rng.shuffle(existing)
    turn = f"{share}% of every paycheck goes straight into the pension pot — automatic, I never see it."
    new = [
        fact(
            f"{p} puts {share}% of each paycheck into a retirement fund.", p, "saving_for", "retirement", when
        )
    ]
    ops = [{"action": "UPDATE", "target": existing.index(old) + 1}]
    return case("refinement", p, when, [turn], existing, new, ops)


def laptop_model_spec(rng, p, when):
    size, chip = rng.choice([("14-inch", "M3"), ("16-inch", "M2 Pro"), ("13-inch", "M1")])
    old = fact(f"{p} uses a Mac.", p, "uses", "Mac", _since(rng))
    existing = [*filler(rng, p, rng.randrange(3), set()), old]
    rng.shuffle(existing)
    turn = f"it's the {size} MacBook Pro, {chip} chip — the one work gave me"
    new = [
        fact(f"{p} uses a {size} MacBook Pro with an {chip} chip, provided by work.", p, "uses", "Mac", when)
    ]
    ops = [{"action": "UPDATE", "target": existing.index(old) + 1}]
    return case("refinement", p, when, [turn], existing, new, ops)


def delivery_address_flat_number(rng, p, when):
    flat, code = rng.choice(["4B", "12", "3 gauche"]), rng.choice(["75011", "75019", "75004"])
    old = fact(
        f"{p}'s address is 12 Rue Oberkampf, Paris.", p, "address", "12 Rue Oberkampf", _since(rng), "profile"
    )
    existing = [old, *filler(rng, p, 1 + rng.randrange(2), set())]
    rng.shuffle(existing)
    turn = f"For deliveries add the flat number, {flat}, and the postcode is {code} — couriers keep getting lost."
    new = [
        fact(
            f"{p}'s address is 12 Rue Oberkampf, flat {flat}, {code} Paris.",
            p,
            "address",
            "12 Rue Oberkampf",
            when,
            "profile",
        )
    ]
    ops = [{"action": "UPDATE", "target": existing.index(old) + 1}]
    return case("refinement", p, when, [turn], existing, new, ops)


def lunch_spot_named(rng, p, when):
    name = rng.choice(["Baan Suan", "Krua Thai", "Lemongrass"])
    old = fact(
        f"{p} often eats at a Thai restaurant near work.",
        p,
        "eats_at",
        "Thai restaurant",
        _since(rng),
        "preference",
    )
    employer = rng.choice(EMPLOYERS)
    job = fact(f"{p} works at {employer}.", p, "works_at", employer, _since(rng), "profile")
    existing = [old, job]
    rng.shuffle(existing)
    turn = f"The Thai place is called {name}, btw. Lunch there most weekdays, the pad see ew is unreal."
    new = [
        fact(
            f"{p} often has lunch at {name}, a Thai restaurant near work.",
            p,
            "eats_at",
            "Thai restaurant",
            when,
            "preference",
        )
    ]
    ops = [{"action": "UPDATE", "target": existing.index(old) + 1}]
    return case("refinement", p, when, [turn], existing, new, ops)


def best_friend_since_school(rng, p, when):
    friend, age = rng.choice(FRIENDS), rng.choice(["seven", "nine", "eleven"])
    old = fact(f"{p} is friends with {friend}.", p, "friends_with", friend, _since(rng))
    other = rng.choice([f for f in FRIENDS if f != friend])
    existing = [old, fact(f"{p} is friends with {other}.", p, "friends_with", other, _since(rng))]
    rng.shuffle(existing)
    turn = f"{friend} and I go way back — best mates since primary school, since we were {age}."
    new = [
        fact(
            f"{p} and {friend} have been best friends since primary school.", p, "friends_with", friend, when
        )
    ]
    ops = [{"action": "UPDATE", "target": existing.index(old) + 1}]
    return case("refinement", p, when, [turn], existing, new, ops)


def standup_time_terse(rng, p, when):
    slot, team = rng.choice(["Tue 9:30", "Mon 10:00", "Thu 8:45"]), rng.choice(["design", "data", "platform"])
    old = fact(f"{p} has a weekly team meeting.", p, "has_meeting", "team meeting", _since(rng))
    existing = [*filler(rng, p, 2, set()), old]
    rng.shuffle(existing)
    turn = f"weekly sync: {slot}, {team} team."
    new = [
        fact(
            f"{p} has a weekly team meeting with the {team} team ({slot}).",
            p,
            "has_meeting",
            "team meeting",
            when,
        )
    ]
    ops = [{"action": "UPDATE", "target": existing.index(old) + 1}]
    return case("refinement", p, when, [turn], existing, new, ops)


def hut_to_hut_hiking_german(rng, p, when):
    range_ = rng.choice(["the Alps", "the Dolomites", "the Tatras"])
    old = fact(f"{p} enjoys hiking.", p, "enjoys", "hiking", _since(rng), "preference")
    existing = [old, *filler(rng, p, rng.randrange(3), set(HOBBIES))]
    rng.shuffle(existing)
    turn = f"Am liebsten Hüttenwanderungen — several days in {range_}, sleeping in mountain huts."
    new = [
        fact(f"{p} enjoys multi-day hut-to-hut hikes in {range_}.", p, "enjoys", "hiking", when, "preference")
    ]
    ops = [{"action": "UPDATE", "target": existing.index(old) + 1}]
    return case("refinement", p, when, [turn], existing, new, ops)


TEMPLATES = [
    food_in_detail,
    yoga_style_and_days,
    dog_breed_and_age,
    nurse_unit_formal,
    allergy_severity_epipen,
    law_degree_non_native,
    car_trim_and_colour,
    neighbourhood_named,
    younger_sister_gets_a_name,
    long_run_route,
    jazz_era_narrowed,
    japanese_level_and_tutor,
    gluten_free_for_coeliac,
    shelter_shift_details,
    vegetable_patch_rambling,
    son_age_given,
    japan_trip_itinerary,
    metformin_dose_clinical,
    sci_fi_authors_french,
    band_role_bassist,
    asthma_trigger_non_native,
    goalkeeper_portuguese,
    solstice_birthday,
    two_rescue_cats_named,
    christmas_at_the_farm,
    pension_percentage,
    laptop_model_spec,
    delivery_address_flat_number,
    lunch_spot_named,
    best_friend_since_school,
    standup_time_terse,
    hut_to_hut_hiking_german,
]

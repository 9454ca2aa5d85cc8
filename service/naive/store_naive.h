/* store_naive.h - the defences that live in the MySQL adapters, and the
 * naive code the replay lab runs when one is switched off (defenses.h).
 * DEMO ONLY: everything is on until store_set_defenses() says otherwise. */
#ifndef TICKETD_STORE_NAIVE_H
#define TICKETD_STORE_NAIVE_H

#include <stdbool.h>

/* Which defences are on (enum defense bits). Call once, before serving. */
void store_set_defenses(unsigned on);

/* True when the defence bit is on. */
bool store_defense_on(unsigned bit);

#endif

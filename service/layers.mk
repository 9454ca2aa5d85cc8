# service/layers.mk - the rule of ticketd's house, written once.
#
# service/ has one folder per layer. Code in a folder may include (and call)
# its own folder and the folders listed for it below, nothing else; the
# Makefile compiles each folder with -I for exactly those, so an include
# that breaks the rule does not compile, and scripts/check-layers.sh (run by
# make test) checks the same rule on the objects, where a call can break it
# without an include (an extern written by hand, a symbol defined above).
#
# Dependencies point down: base knows nothing of tickets; model holds pure
# values and rules; ports declare what the domain needs from storage (no
# code); the domain drives the ports; the adapters (mysql, redis, naive)
# implement them without seeing the domain; api answers requests with the
# domain; http carries them; jobs run the domain in the background; main.c
# and boot.c wire everything together. The demo's naive variants (naive)
# replace the MySQL adapter's entries and the domain's steps alike, so they
# may see the domain; the domain never calls them: boot.c puts them in its
# tables. The naive Redis entries are redis/cache_naive.c: a client
# library is included in its adapter's folder only.

LAYERS := base model ports domain mysql redis naive api http jobs

LAYER_base :=
LAYER_model := base
LAYER_ports := base model
LAYER_domain := base model ports
LAYER_mysql := base model ports
LAYER_redis := base model ports
LAYER_naive := base model ports domain mysql
LAYER_api := base model ports domain
LAYER_http := base model ports domain api
LAYER_jobs := base model ports domain
LAYER_main := $(LAYERS)

# A function declared in ports/*.h may be called from any folder that may
# include ports, wherever its adapter is defined: these folders hold the
# adapters.
LAYER_ADAPTERS := mysql redis naive

# Breaches still open, each as FROM:TO, FROM a folder or a module
# (folder/name), TO a folder or a module (or main, service/main.c and
# boot.c): FROM may include TO's folder and call into TO, and the two may
# call each other.
# Every entry says why it is still here; the list is meant to be empty, and
# make test fails on an entry nothing needs any more.
LAYER_EXCEPTIONS :=

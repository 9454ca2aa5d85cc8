/* main.c - ticketd's commands: serve, worker, token, dead-letters, lab,
 * version, help, and their options. Help and unknown commands are answered
 * before any setting is read. What serve, worker and partitions boot (the
 * adapters, the background parts, the drain) is in boot.c. */
#include "boot.h"
#include "config.h"
#include "auth.h"
#include "deadletters.h"
#include "err.h"
#include "sentinel.h"
#include "util.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdlib.h>
#include <search.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE *f)
{
    fprintf(f, "usage: ticketd serve [--config FILE]\n"
               "       ticketd worker [--config FILE]\n"
               "       ticketd token --user ID [--admin] [--ttl SECONDS] [--config FILE]\n"
               "       ticketd dead-letters list [--config FILE] [--consumer NAME] [--json]\n"
               "       ticketd dead-letters replay [--config FILE] (--id N | --all) "
               "[--consumer NAME]\n"
               "       ticketd partitions [--wait SECONDS] [--config FILE]\n"
               "       ticketd lab [serve | lesson [NAME] | record] [OPTIONS]\n"
               "       ticketd version\n"
               "       ticketd help [COMMAND]    (or: ticketd COMMAND --help)\n"
               "\n"
               "Settings come from TICKETD_* environment variables; FILE holds the same\n"
               "KEY=VALUE lines, and the environment wins over it.\n");
}

/* One entry per command: what `ticketd CMD --help` prints, and which of the
 * shared options it takes. */
enum { OPT_CONFIG = 1, OPT_USER = 2, OPT_ADMIN = 4, OPT_TTL = 8, OPT_WAIT = 16 };

struct command {
    const char *name;
    unsigned opts;
    const char *help;
    bool lists_defences; /* its help ends with the table of defences */
};

static const struct command commands[] = {
    {"serve", OPT_CONFIG,
     "usage: ticketd serve [--config FILE]\n"
     "\n"
     "Serves the HTTP API on TICKETD_BIND:TICKETD_PORT. With TICKETD_WORKERS=1\n"
     "(the default) it also runs the expiry sweep, the outbox relay and the event\n"
     "consumers. SIGTERM or SIGINT drains the requests in flight, then exits 0.\n"
     "\n"
     "  --config FILE  KEY=VALUE settings (the environment wins over them)\n",
     true},
    {"worker", OPT_CONFIG,
     "usage: ticketd worker [--config FILE]\n"
     "\n"
     "Runs only the background work (expiry sweep, outbox relay, event consumers),\n"
     "no HTTP. Any number of workers and servers may share one Redis and MariaDB.\n"
     "\n"
     "  --config FILE  KEY=VALUE settings (the environment wins over them)\n",
     true},
    {"token", OPT_CONFIG | OPT_USER | OPT_ADMIN | OPT_TTL,
     "usage: ticketd token --user ID [--admin] [--ttl SECONDS] [--config FILE]\n"
     "\n"
     "Prints a bearer token (HS256 JWT signed with TICKETD_JWT_SECRET) for a user.\n"
     "\n"
     "  --user ID      the user id, 1 to 2^53-1 (required)\n"
     "  --admin        an admin token (sessions, audit)\n"
     "  --ttl SECONDS  lifetime (default 3600)\n"
     "  --config FILE  KEY=VALUE settings (the environment wins over them)\n",
     false},
    {"dead-letters", 0, NULL, false}, /* deadletters_main answers for itself */
    {"partitions", OPT_CONFIG | OPT_WAIT,
     "usage: ticketd partitions [--wait SECONDS] [--config FILE]\n"
     "\n"
     "Runs one round of the retention job that serve and worker run every\n"
     "TICKETD_RETENTION_INTERVAL_MS: splits off the day partitions of the next\n"
     "TICKETD_RETENTION_AHEAD_DAYS days of the dedup and relay tables and drops\n"
     "those past their TICKETD_RETAIN_*_H, then prints one line per table.\n"
     "One instance at a time changes partitions: while another holds the job's\n"
     "lease, it waits, then does its own round. Exits 1 when a table could not be\n"
     "done, or when the lease was still held at the end of the wait.\n"
     "\n"
     "  --wait SECONDS  how long to wait for the lease, 0 to 3600 (default 60, as\n"
     "                  long as a holder's lease lasts)\n"
     "  --config FILE   KEY=VALUE settings (the environment wins over them)\n",
     false},
    {"lab", 0,
     "usage: ticketd lab [serve | lesson [NAME] | record] [OPTIONS]\n"
     "\n"
     "Runs the replay lab of this checkout (lab/ticketd-lab, beside build/): serve\n"
     "shows the lessons live on http://127.0.0.1:8090/, lesson NAME runs one\n"
     "without its defence and with it. `ticketd lab serve --help` lists the options.\n"
     "It starts servers of its own; the service itself runs none of its code.\n",
     false},
    {"version", 0,
     "usage: ticketd version\n"
     "\n"
     "Prints ticketd's version. Reads no settings.\n",
     false},
    {"help", 0,
     "usage: ticketd help [COMMAND]\n"
     "\n"
     "Prints the commands, or what COMMAND does and takes.\n",
     false},
};

#define N_COMMANDS (sizeof commands / sizeof commands[0])

static const struct command *find_command(const char *name)
{
    size_t n = N_COMMANDS;
    return lfind(&name, commands, &n, sizeof commands[0], name_first_cmp);
}

static bool is_help_flag(const char *s)
{
    return strcmp(s, "-h") == 0 || strcmp(s, "--help") == 0;
}

static void unknown_command(const char *name)
{
    fprintf(stderr,
            "ticketd: unknown command '%s' (choices: serve, worker, token, dead-letters, "
            "partitions, lab, version, help)\n",
            name);
    usage(stderr);
}

/* The defences TICKETD_DEFENSES may switch off, read from their table so
 * that the help never lists one the parser does not know. */
static void print_defences(FILE *f)
{
    static const struct {
        const char *name, *lesson;
    } rows[] = {
#define DEFENCE(id, bit, name, lesson, anchor, harm) {name, lesson},
#include "defences.def"
#undef DEFENCE
    };
    fputs("\nTICKETD_DEFENSES=-NAME,... switches defences off (TICKETD_ENV=demo only,\n"
          "logged loudly); `ticketd lab lesson LESSON` shows what gets through:\n",
          f);
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        fprintf(f, "  %-28s %s\n", rows[i].name, rows[i].lesson[0] ? rows[i].lesson : "-");
}

/* `ticketd help [CMD]` and `ticketd CMD --help`. */
static int command_help(const char *name)
{
    const struct command *c = find_command(name);
    if (c == NULL) {
        unknown_command(name);
        return 2;
    }
    if (c->help == NULL) {
        char arg0[] = "dead-letters", arg1[] = "--help";
        char *args[] = {arg0, arg1, NULL};
        return deadletters_main(2, args);
    }
    fputs(c->help, stdout);
    if (c->lists_defences)
        print_defences(stdout);
    return 0;
}

static int cmd_token(struct config *cfg, int64_t user, bool admin, int64_t ttl)
{
    char *tok = auth_issue(cfg->jwt_secret, user, admin, wall_s(), ttl);
    if (tok == NULL) {
        fprintf(stderr, "ticketd: cannot sign a token\n");
        return EXIT_FAILURE;
    }
    printf("%s\n", tok);
    free(tok);
    return EXIT_SUCCESS;
}

static const char *option_name(int c)
{
    switch (c) {
    case 'u':
        return "--user";
    case 'a':
        return "--admin";
    case 't':
        return "--ttl";
    case 'w':
        return "--wait";
    default:
        return "--config";
    }
}

static unsigned option_bit(int c)
{
    switch (c) {
    case 'u':
        return OPT_USER;
    case 'a':
        return OPT_ADMIN;
    case 't':
        return OPT_TTL;
    case 'w':
        return OPT_WAIT;
    default:
        return OPT_CONFIG;
    }
}

/* `ticketd lab ...`: the lab is a program of its own, lab/ticketd-lab of
 * the checkout this binary was built in (build/<flavour>/ticketd), so that
 * no demo code is linked into the service. It gets the remaining words. */
static int lab_exec(int argc, char **argv)
{
    char exe[4096], path[4200];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    char *slash;

    if (n <= 0) {
        fprintf(stderr, "ticketd lab: cannot find this binary's path\n");
        return 1;
    }
    exe[n] = '\0';
    /* build/<flavour>/ticketd -> the checkout is two folders up */
    for (int up = 0; up < 3; up++) {
        slash = strrchr(exe, '/');
        if (slash == NULL) {
            fprintf(stderr, "ticketd lab: %s is not inside a checkout\n", exe);
            return 1;
        }
        *slash = '\0';
    }
    snprintf(path, sizeof(path), "%s/lab/ticketd-lab", exe);
    char **args = calloc((size_t)argc, sizeof(*args));
    if (args == NULL)
        return 1;
    args[0] = path;
    for (int i = 2; i < argc; i++)
        args[i - 1] = argv[i];
    execv(path, args);
    fprintf(stderr, "ticketd lab: cannot run %s: %s (the lab runs from a checkout: make lab)\n",
            path, strerror(errno));
    free(args);
    return 1;
}

/* The commands that need no settings: help, version, dead-letters (which
 * reads its own), and unknown names. Returns the exit status, or -1 when
 * argv[1] is a command that goes on; *command is then set. */
static int answer_early(int argc, char **argv, const struct command **command)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (is_help_flag(cmd) || strcmp(cmd, "help") == 0) {
        if (strcmp(cmd, "help") == 0 && argc == 3)
            return command_help(argv[2]);
        if (argc > 2) {
            usage(stderr);
            return 2;
        }
        usage(stdout);
        return 0;
    }
    if (strcmp(cmd, "--version") == 0)
        cmd = "version";
    *command = find_command(cmd);
    if (*command == NULL) {
        unknown_command(cmd);
        return 2;
    }
    if (strcmp(cmd, "dead-letters") == 0)
        return deadletters_main(argc - 1, argv + 1);
    if (strcmp(cmd, "lab") == 0)
        return lab_exec(argc, argv);
    if (strcmp(cmd, "version") == 0) {
        if (argc == 3 && is_help_flag(argv[2]))
            return command_help(cmd);
        if (argc > 2) {
            fprintf(stderr, "ticketd: version takes no arguments\n");
            return 2;
        }
        printf("ticketd %s\n", TICKETD_VERSION);
        return 0;
    }
    return -1;
}

/* The options of serve, worker, token and partitions. */
struct cli {
    const char *config_path;
    int64_t user, ttl;
    int64_t wait_s; /* partitions; -1: the lease's length */
    bool admin;
};

/* Reads one option c (its value in optarg) into cli. Returns -1, or the
 * exit status after saying what is wrong. */
static int take_option(const struct command *command, int c, struct cli *cli)
{
    if ((command->opts & option_bit(c)) == 0) {
        fprintf(stderr, "ticketd %s: takes no %s\n", command->name, option_name(c));
        fputs(command->help, stderr);
        return 2;
    }
    switch (c) {
    case 'c':
        cli->config_path = optarg;
        break;
    case 'u':
        if (!parse_i64(optarg, 1, AUTH_MAX_USER_ID, &cli->user)) {
            fprintf(stderr, "ticketd: --user must be an id from 1 to 2^53-1\n");
            return 2;
        }
        break;
    case 'a':
        cli->admin = true;
        break;
    case 't':
        if (!parse_i64(optarg, 1, 10L * 365 * 86400, &cli->ttl)) {
            fprintf(stderr, "ticketd: --ttl must be a number of seconds\n");
            return 2;
        }
        break;
    case 'w':
        if (!parse_i64(optarg, 0, 3600, &cli->wait_s)) {
            fprintf(stderr, "ticketd: --wait must be a number of seconds from 0 to 3600\n");
            return 2;
        }
        break;
    }
    return -1;
}

/* Parses the options after the command. Returns -1, or the exit status
 * (help given, or an error said). */
static int parse_options(const struct command *command, int argc, char **argv, struct cli *cli)
{
    static const struct option opts[] = {
        {"config", required_argument, NULL, 'c'},
        {"user", required_argument, NULL, 'u'},
        {"admin", no_argument, NULL, 'a'},
        {"ttl", required_argument, NULL, 't'},
        {"wait", required_argument, NULL, 'w'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c;
    optind = 2;
    opterr = 0; /* the messages below name the command */
    while ((c = getopt_long(argc, argv, ":c:u:at:w:h", opts, NULL)) != -1) {
        if (c == 'h')
            return command_help(command->name);
        if (c == '?' || c == ':') {
            fprintf(stderr, "ticketd %s: %s option %s\n", command->name,
                    c == ':' ? "missing the value of" : "unknown", argv[optind - 1]);
            fputs(command->help, stderr);
            return 2;
        }
        int rc = take_option(command, c, cli);
        if (rc >= 0)
            return rc;
    }
    if (optind != argc) {
        fprintf(stderr, "ticketd %s: unexpected argument '%s'\n", command->name, argv[optind]);
        fputs(command->help, stderr);
        return 2;
    }
    if (strcmp(command->name, "token") == 0 && cli->user == 0) {
        fprintf(stderr, "ticketd: token needs --user ID\n");
        return 2;
    }
    return -1;
}

int main(int argc, char **argv)
{
    const struct command *command = NULL;
    struct cli cli = {.ttl = 3600, .wait_s = -1};
    struct config cfg;
    int rc;

    /* Everything that needs no settings is answered before any are read, so
     * that asking for help never fails for want of a secret. */
    if ((rc = answer_early(argc, argv, &command)) >= 0)
        return rc;
    if ((rc = parse_options(command, argc, argv, &cli)) >= 0)
        return rc;
    if (config_load(&cfg, cli.config_path) != TD_OK) {
        config_cleanup(&cfg);
        return 2;
    }
    /* The Redis adapter's own settings, checked here rather than in
     * config.c, which sits below the adapters (service/layers.mk). */
    char why[512];
    if (!sentinel_settings_valid(cfg.redis_sentinels, cfg.redis_master, why, sizeof why)) {
        fprintf(stderr, "ticketd: %s\n", why);
        config_cleanup(&cfg);
        return 2;
    }
    if (strcmp(command->name, "serve") == 0)
        rc = cmd_serve(&cfg, true);
    else if (strcmp(command->name, "worker") == 0)
        rc = cmd_serve(&cfg, false);
    else if (strcmp(command->name, "partitions") == 0)
        rc = cmd_partitions(&cfg, cli.wait_s < 0 ? -1 : (int)cli.wait_s * 1000);
    else
        rc = cmd_token(&cfg, cli.user, cli.admin, cli.ttl);
    config_cleanup(&cfg);
    return rc;
}

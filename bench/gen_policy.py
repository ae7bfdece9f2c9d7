#!/usr/bin/env python3
"""Writes a large, realistic, syntactically valid Converge policy.

The shape is the one `grammar/benches/parse.rs` generates in memory (the two
produce byte-identical text for the same promise count; see
docs/performance.md): a header of classes, lets and a body, then bundles of
ten promises each (package, directory, file, service, user, line, command,
line in a `for`, link, heredoc file), with parameters, interpolation, octal
modes, durations, lists, refs and a `when` block, and a `policy` block that
calls every bundle. About 3.1 lines per promise.

Usage: python3 bench/gen_policy.py [--promises N] [-o FILE]   (stdout if no -o)
"""

import argparse
import sys

PER_BUNDLE = 10


def header(promises, bundles):
    return (
        f"// Generated policy: {promises} promises in {bundles} bundles.\n"
        "// Shape: bench/gen_policy.py and grammar/benches/parse.rs.\n"
        "\n"
        'class web = sys.hostname =~ r"^web[0-9]+$";\n'
        'class db = sys.hostname =~ r"^db[0-9]+$";\n'
        "class maintenance = (monday || sunday) && hr03;\n"
        "exclusive { web, db }\n"
        "\n"
        'let ntp_servers: list<string> = ["0.pool.ntp.org", "1.pool.ntp.org", "2.pool.ntp.org"];\n'
        'let banner = "Managed by converge on ${sys.hostname}\\n";\n'
        "\n"
        "/* Splice into files that hold secrets. */\n"
        "body secure_file {\n"
        "  mode = 0o600;\n"
        '  owner = "root";\n'
        '  group = "root";\n'
        "}\n"
    )


def bundle(b):
    return (
        "\n"
        f'bundle app_{b}(port: int = {8000 + b % 1000}, docroot: string = "/srv/app{b}") {{\n'
        f'  package "app{b}-server" {{ state = installed; version = "2.{b % 50}.{b % 7}"; }}\n'
        f'  directory "${{docroot}}/data" {{ mode = 0o750; owner = "app{b}"; group = "app{b}"; }}\n'
        f'  file "/etc/app{b}/app.conf" {{\n'
        '    content = "listen ${port}\\nserver_name ${sys.fqdn}\\nroot ${docroot}\\n";\n'
        "    mode = 0o640;\n"
        f'    notify = [service "app{b}"];\n'
        "  }\n"
        f'  service "app{b}" {{ state = running; enabled = true; after = [package "app{b}-server"]; }}\n'
        f'  user "app{b}" {{ ensure = present; uid = {20000 + b}; shell = "/usr/sbin/nologin"; groups = ["app", "log"]; }}\n'
        "  when debian && !maintenance {\n"
        f'    line "/etc/default/app{b}" {{ present = "OPTS=\\"--port ${{port}} --id {b}\\""; }}\n'
        f'    command "migrate-app{b}" {{\n'
        f'      run = ["/usr/bin/app{b}", "migrate", "--to", "latest"];\n'
        f'      creates = "/var/lib/app{b}/migrated";\n'
        "      timeout = 5m;\n"
        "    }\n"
        "  }\n"
        "  for s in ntp_servers {\n"
        f'    line "/etc/app{b}/ntp.conf" {{ present = "server ${{s}} iburst"; }}\n'
        "  }\n"
        f'  link "/etc/app{b}/current" {{ target = "/srv/app{b}/releases/{b % 10}"; after = [file "/etc/app{b}/app.conf"]; }}\n'
        f'  file "/etc/app{b}/motd" {{\n'
        '    content = """\n'
        f"      app{b} on ${{sys.hostname}}, port ${{port}}. ${{banner}}\n"
        '      """;\n'
        "    use secure_file;\n"
        "  }\n"
        "}\n"
    )


def extra(count):
    out = "\nbundle extra {\n"
    for i in range(count):
        out += f'  package "extra-{i}" {{ state = installed; }}\n'
    return out + "}\n"


def call(b):
    if b % 3 == 0:
        return f"  when web {{ app_{b}(port = {9000 + b % 1000}); }}\n"
    return f"  app_{b}();\n"


def generate(promises, write):
    full, rest = divmod(promises, PER_BUNDLE)
    write(header(promises, full + (1 if rest else 0)))
    for b in range(full):
        write(bundle(b))
    if rest:
        write(extra(rest))
    write("\npolicy {\n")
    for b in range(full):
        write(call(b))
    if rest:
        write("  extra();\n")
    write("}\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--promises", type=int, default=100_000, help="number of promises (default 100000)")
    parser.add_argument("-o", "--output", help="file to write (default: stdout)")
    args = parser.parse_args()
    if args.promises < 0:
        parser.error("--promises must be >= 0")
    if args.output:
        with open(args.output, "w", encoding="utf-8", newline="\n") as f:
            generate(args.promises, f.write)
    else:
        generate(args.promises, sys.stdout.write)


if __name__ == "__main__":
    main()

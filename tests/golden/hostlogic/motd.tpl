Welcome to ${sys.hostname}
{% for label in split(sys.fqdn, ".") %}
{% for part in split(sys.hostname, "0") %}
${label}/${part}
{% endfor %}
{% endfor %}
{% if sys.hostname == "web01" %}
the first web server
{% else %}
another host
{% endif %}

"""Creates a bucket on moto or a container on Azurite (Python stdlib only).

    create_bucket.py s3 PORT BUCKET
    create_bucket.py azure PORT CONTAINER ACCOUNT KEY

moto accepts unsigned requests; Azurite needs Shared Key authorization, so
the request is signed here as the Blob service documents it. Prints nothing
on success; exits non-zero with the server's answer otherwise.
"""

import base64
import hashlib
import hmac
import sys
import urllib.error
import urllib.request
from email.utils import formatdate

API_VERSION = "2021-08-06"
# urllib sends a Content-Type with every body; name it so it can be signed.
CONTENT_TYPE = "application/octet-stream"


def put(url, headers):
    request = urllib.request.Request(url, data=b"", method="PUT", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def s3(port, bucket):
    return put(f"http://127.0.0.1:{port}/{bucket}", {"Content-Type": CONTENT_TYPE})


def azure(port, container, account, key):
    date = formatdate(usegmt=True)
    ms_headers = {"x-ms-date": date, "x-ms-version": API_VERSION}
    canonical_headers = "".join(f"{k}:{v}\n" for k, v in sorted(ms_headers.items()))
    # Path-style URL (http://host:port/account/container): the canonical
    # resource is /account followed by the URL path.
    path = f"/{account}/{container}"
    canonical_resource = f"/{account}{path}\nrestype:container"
    # VERB, Content-Encoding, Content-Language, Content-Length (empty when
    # 0), Content-MD5, Content-Type, Date, If-Modified-Since, If-Match,
    # If-None-Match, If-Unmodified-Since, Range.
    standard = ["PUT", "", "", "", "", CONTENT_TYPE, "", "", "", "", "", ""]
    string_to_sign = "\n".join(standard) + "\n" + canonical_headers + canonical_resource
    digest = hmac.new(base64.b64decode(key), string_to_sign.encode(), hashlib.sha256)
    signature = base64.b64encode(digest.digest()).decode()
    headers = dict(ms_headers, **{"Content-Type": CONTENT_TYPE})
    headers["Authorization"] = f"SharedKey {account}:{signature}"
    return put(f"http://127.0.0.1:{port}{path}?restype=container", headers)


def main(argv):
    kind, port, name = argv[1], int(argv[2]), argv[3]
    if kind == "s3":
        status, body = s3(port, name)
    elif kind == "azure":
        status, body = azure(port, name, argv[4], argv[5])
    else:
        sys.exit(f"unknown store kind {kind!r}")
    if status not in (200, 201):
        sys.exit(f"creating {name} on {kind} port {port}: HTTP {status}: {body.decode(errors='replace')}")


if __name__ == "__main__":
    main(sys.argv)

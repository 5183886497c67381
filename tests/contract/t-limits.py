#!/usr/bin/env python3
# Body limits: the reference's 10 MiB file content is accepted; a 413 is
# readable by a client that sends its body without Expect: 100-continue.
from manager import *

content = "x" * (10 * 1024 * 1024)
r = file_create("/workspace/ten-mib.txt", content)
check("/file-create with 10 MiB of content: not 413", r.status_code not in (0, 413), r.status_code)
big = b'{"path":"/workspace/big","content":"' + b"y" * (40 * 1024 * 1024) + b'"}'
r = request("POST", "/file-create", raw=big)
check("over the limit, no Expect: the client reads a 413 (no reset)", r.status_code == 413, r.status_code)
done()

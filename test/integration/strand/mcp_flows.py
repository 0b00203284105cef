"""Drives Strand's MCP server (strand-mcp 0.1.0, unchanged) over stdio as an agent would.

argv: slide path, output folder. STRAND_API_KEY and STRAND_BASE_URL name the service; the
server is started with them. Prints one JSON report.
"""
import asyncio
import json
import os
import sys
from pathlib import Path

import numpy as np
import zarr
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

slide, out = sys.argv[1], Path(sys.argv[2])


def decoded(result):
    text = result.content[0].text
    return {'error': text} if text.startswith('error:') else json.loads(text)


async def main():
    report = {}
    server = StdioServerParameters(command=sys.executable, args=['-m', 'strand_mcp'], env=dict(os.environ))
    async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        report['tools'] = sorted(tool.name for tool in (await session.list_tools()).tools)

        async def call(name, arguments):
            return decoded(await session.call_tool(name, arguments))

        upload = await call('upload_slide', {'path': slide})
        report['upload'] = upload
        # An agent retries the estimate while the sample is prepared (409 sample_not_ready).
        refusals = []
        for _ in range(600):
            estimate = await call('estimate_run', {'upload_id': upload['id'], 'markers': ['CD3', 'CD8']})
            if 'error' not in estimate:
                break
            refusals.append(estimate['error'])
            await asyncio.sleep(0.5)
        report['estimate'] = estimate
        report['estimateRefusals'] = sorted(set(refusals))
        submitted = await call('submit_run', {'upload_id': upload['id'], 'markers': ['CD3', 'CD8']})
        report['submit'] = submitted
        report['getJob'] = await call('get_job', {'job_id': submitted['job_id']})
        report['wait'] = await call('wait_for_job', {'job_id': submitted['job_id'], 'timeout_s': 900})
        downloaded = await call('download_results', {'job_id': submitted['job_id'], 'dest_dir': str(out)})
        report['download'] = downloaded
        arrays = {}
        for name in ['CD3', 'CD8']:
            array = zarr.open_array(str(Path(downloaded['path']) / 'markers' / name / '0'), mode='r')
            arrays[name] = {'shape': list(array.shape), 'nonzero': int(np.count_nonzero(array[:]))}
        report['arrays'] = arrays
    print(json.dumps(report))


asyncio.run(main())

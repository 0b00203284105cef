"""Drives Strand's Python SDK (strand-sdk 0.2.0, unchanged) against the service.

argv: slide path, output folder. STRAND_API_KEY and STRAND_BASE_URL (without /api/v1) name the
service. Prints one JSON report; the Jest test holds it to the contract.
"""
import json
import os
import sys
from pathlib import Path

import httpx
import numpy as np
import zarr
from strand import Client, StrandError

slide, out = sys.argv[1], Path(sys.argv[2])
markers = ['DAPI', 'CD3']
report = {}
client = Client()


def read_back(folder, names):
    """Every level of every marker the SDK wrote, opened by zarr-python."""
    arrays = {}
    for name in names:
        levels = []
        level = 0
        while (folder / 'markers' / name / str(level) / 'zarr.json').exists():
            array = zarr.open_array(str(folder / 'markers' / name / str(level)), mode='r')
            levels.append({'shape': list(array.shape), 'dtype': str(array.dtype), 'nonzero': int(np.count_nonzero(array[:]))})
            level += 1
        arrays[name] = levels
    return arrays


# The headline call: upload, submit, wait, download.
stages = []
result = client.predict(
    slide,
    markers,
    output_dir=out / 'one-call',
    poll_interval_sec=1.0,
    timeout_sec=900.0,
    on_progress=lambda stage, _fraction: stages.append(stage),
)
report['predict'] = {
    'jobId': result.job_id,
    'status': result.status,
    'creditsUsed': result.credits_used,
    'stages': list(dict.fromkeys(stages)),
    'markerOutputs': {name: str(path) for name, path in result.marker_outputs.items()},
    'arrays': read_back(out / 'one-call', list(result.marker_outputs)),
    'resultBasePath': result.results.result_base_path,
}

# The primitives, one by one.
upload = client.uploads.upload_file(slide, progress=lambda done, total: None)
report['upload'] = {
    'id': upload.id,
    'gcsPath': upload.gcs_path,
    'widthPx': upload.width_px,
    'heightPx': upload.height_px,
    'status': upload.status,
}
try:
    early = client.predict.estimate(upload.id, ['CD3'])
    report['earlyEstimate'] = {'estimatedCredits': early.estimated_credits}
except StrandError as err:
    report['earlyEstimate'] = {'status': err.status_code, 'error': err.error_code}

job = client.predict.submit(upload.id, ['CD3'])
report['submit'] = {'jobId': job.id, 'reservedCredits': job.reserved_credits}
events = list(job.stream_events())
report['events'] = [
    {'id': e.id, 'status': e.status, 'progress': e.progress, 'resultGcsPath': e.result_gcs_path} for e in events
]
final = job.wait(timeout=900, poll_interval=1.0)
report['wait'] = {'status': final.status, 'progress': final.progress, 'resultsAvailable': final.results_available}

estimate = client.predict.estimate(upload.id, ['CD3'])
report['estimate'] = {
    'patchCount': estimate.patch_count,
    'markerCount': estimate.marker_count,
    'estimatedCredits': estimate.estimated_credits,
    'orgBalance': estimate.org_balance,
    'orgPending': estimate.org_pending,
}
fetched = client.jobs.get(job.id).status
report['jobsGet'] = {
    'id': fetched.id,
    'status': fetched.status,
    'reservedCredits': fetched.reserved_credits,
    'markers': fetched.markers,
    'completedAt': fetched.completed_at is not None,
}
results = job.results()
report['results'] = {
    'resultUrl': results.result_url,
    'resultBasePath': results.result_base_path,
    'multiscaleNames': results.multiscale_names(),
    'withHe': results.multiscale_names(include_he=True),
}
written = results.download_to(out / 'lower')
report['downloadTo'] = {'path': str(written), 'arrays': read_back(Path(written), results.multiscale_names())}

# Retention under its older names, and restore.
other = client.uploads.upload_file(slide)
report['setRetention'] = {
    'date': client.samples.set_retention(upload.id, '2031-01-01T00:00:00Z', reason='study ends in 2031'),
    'pin': client.samples.set_retention(upload.id, pin=True),
    'orgDefault': client.samples.set_retention(upload.id, use_org_default=True),
}
report['setRetentionBulk'] = client.samples.set_retention_bulk([upload.id, other.id], pin=True)
api = client.api_root
headers = {'Authorization': f"Bearer {os.environ['STRAND_API_KEY']}"}
trashed = httpx.delete(f'{api}/samples/{other.id}', headers=headers)
report['trashed'] = trashed.status_code
report['restore'] = client.samples.restore(other.id)
report['afterRestore'] = httpx.get(f'{api}/samples/{other.id}', headers=headers).json()
print(json.dumps(report))

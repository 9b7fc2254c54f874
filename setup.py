"""Packaging for an nbdev 2 project: every setting is read from settings.ini."""
from configparser import ConfigParser
import setuptools, shlex

config = ConfigParser(delimiters=['='])
config.read('settings.ini', encoding='utf-8')
cfg = config['DEFAULT']

expected = ('version description keywords author author_email license status min_python '
            'audience language lib_name user').split()
missing = [o for o in expected if o not in cfg]
if missing: raise ValueError(f"settings.ini is missing {missing}")

licenses = {'apache2': 'Apache-2.0'}   # an SPDX expression (PEP 639): no License classifier, which setuptools deprecates
statuses = ['1 - Planning', '2 - Pre-Alpha', '3 - Alpha', '4 - Beta', '5 - Production/Stable',
            '6 - Mature', '7 - Inactive']
py_versions = '3.10 3.11 3.12 3.13'.split()

lic = licenses[cfg['license'].lower()]
min_python = cfg['min_python']
requirements = shlex.split(cfg.get('requirements', ''))
lab_requirements = shlex.split(cfg.get('lab_requirements', ''))
dev_requirements = shlex.split(cfg.get('dev_requirements', ''))
console_scripts = cfg.get('console_scripts', '').split()

setuptools.setup(
    name=cfg['lib_name'],
    license=lic,
    classifiers=['Development Status :: ' + statuses[int(cfg['status'])],
                 'Intended Audience :: ' + cfg['audience'].title(),
                 'Natural Language :: ' + cfg['language'].title()]
                + ['Programming Language :: Python :: ' + v for v in py_versions[py_versions.index(min_python):]],
    url=cfg['git_url'],
    # namespace packages too: transformer_lit/js (the browser model's tl_model.js) is data inside the package, no __init__.py
    packages=setuptools.find_namespace_packages(include=[cfg['lib_name'], cfg['lib_name'] + '.*']),
    include_package_data=True,
    install_requires=requirements,
    extras_require={'lab': lab_requirements, 'dev': dev_requirements},
    python_requires='>=' + min_python,
    long_description=open('README.md', encoding='utf-8').read(),
    long_description_content_type='text/markdown',
    zip_safe=False,
    entry_points={'console_scripts': console_scripts, 'nbdev': [f"{cfg['lib_path']}={cfg['lib_path']}._modidx:d"]},
    version=cfg['version'],
    description=cfg['description'],
    keywords=cfg['keywords'],
    author=cfg['author'],
    author_email=cfg['author_email'],
)
